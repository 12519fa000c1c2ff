import TokenStore

/// A P-256 key that signs DPoP proofs (RFC 9449) with ES256: the seam between the proof maker
/// (``DPoPProof``) and where the private key lives — in software, sealed in the store
/// under the data key (``DPoPKey``, libcrypto), or inside this machine's TPM (``TPMSigningKey``,
/// `TPM2_Sign` per proof, the private part never leaves the chip).
package protocol DPoPSigningKey: Sendable {
    /// The public key: its point, JWK and thumbprint, computed once (``DPoPPublicKey``).
    var publicKey: DPoPPublicKey { get }
    /// Where the private key is.
    var residence: DPoPKeyResidence { get }
    /// The ES256 signature of `message` (SHA-256, then ECDSA P-256) as JWS wants it: raw r‖s,
    /// 64 bytes, not DER.
    func signES256(_ message: [UInt8]) throws(DPoPSigningFailure) -> [UInt8]
}

extension DPoPSigningKey {
    /// The public key as a JWK with exactly RFC 7638's members in its order (crv, kty, x, y), so
    /// the same text is the proof header's `jwk` and the thumbprint's input. Cached: reading it
    /// costs no key operation.
    package var publicJWK: String { publicKey.jwk }
    /// The RFC 7638 thumbprint (base64url SHA-256 of ``publicJWK``): the `jkt` the server binds
    /// the tokens to. Cached like ``publicJWK``.
    package var thumbprint: String { publicKey.thumbprint }
    /// The public point, uncompressed (0x04 ‖ x ‖ y, 65 bytes).
    package var publicPoint: [UInt8] { publicKey.point }
}

/// Why a DPoP key could not be made or used (no secret in the text).
package enum DPoPSigningFailure: Error, Equatable {
    /// libcrypto.so.3 could not be loaded or lacks a function.
    case libraryUnavailable
    /// The key material or the operation was refused (not a P-256 key pair, a signing error).
    case refused(String)
    /// The TPM holding the key could not sign: unavailable (`tpmUnavailable`), another TPM
    /// (`tpmMismatch`), or a TPM error.
    case store(TokenStoreError)
}
