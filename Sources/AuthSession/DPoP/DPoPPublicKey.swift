import TokenStore

/// The public half of a DPoP (RFC 9449) P-256 key, whatever holds the private half (libcrypto in
/// software, or the TPM): the one place its JWK and RFC 7638 thumbprint are built. Computed once,
/// when the key is made or read, so reading them costs no key operation.
package struct DPoPPublicKey: Sendable, Equatable {
    /// The point, uncompressed (0x04 ‖ x ‖ y, 65 bytes).
    package let point: [UInt8]
    /// The key as a JWK with exactly RFC 7638's members in its order (crv, kty, x, y), so the
    /// same text is the proof header's `jwk` and the thumbprint's input.
    package let jwk: String
    /// The RFC 7638 thumbprint (base64url SHA-256 of ``jwk``): the `jkt` the server binds the
    /// tokens to.
    package let thumbprint: String

    /// The key whose uncompressed point is `point`. The caller has checked the point's shape
    /// (65 bytes, 0x04 first): both key residences read it from a source that gives only that.
    package init(point: [UInt8]) {
        precondition(point.count == 65 && point.first == 0x04, "a P-256 point is 65 bytes, uncompressed")
        self.point = point
        let x = Base64URL.encode(point[1..<33])
        let y = Base64URL.encode(point[33..<65])
        jwk = "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(x)\",\"y\":\"\(y)\"}"
        thumbprint = Base64URL.encode(SHA256Digest.hash(Array(jwk.utf8)))
    }
}
