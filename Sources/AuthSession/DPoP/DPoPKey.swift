internal import CCrypto
import TokenStore

/// The P-256 key of DPoP (RFC 9449) proofs, held by OpenSSL's libcrypto (loaded at the first
/// key, ``CryptoLibrary``): made fresh for a store, or rebuilt from the private scalar and
/// public point the store keeps sealed. Signs ES256 (ECDSA P-256 SHA-256), the signature as
/// JWS wants it: raw r‖s, 64 bytes, not DER.
// @unchecked Sendable: the EVP_PKEY is never changed after init, and OpenSSL 3 lets several
// threads sign with one key at once, each call with its own EVP_MD_CTX.
package final class DPoPKey: DPoPSigningKey, @unchecked Sendable {
    private let key: OpaquePointer
    private let api: tokenstore_crypto
    /// The public key, its JWK and thumbprint (``DPoPPublicKey``), read once from libcrypto.
    package let publicKey: DPoPPublicKey

    /// Why a key could not be made or used (no secret in the text).
    package typealias Failure = DPoPSigningFailure

    /// In software: this process's memory, sealed in the store at rest.
    package var residence: DPoPKeyResidence { .software }

    /// A new random key.
    package static func generate() throws(Failure) -> DPoPKey {
        guard let api = CryptoLibrary.api else { throw .libraryUnavailable }
        guard let context = api.EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw refusal(api, "EC context") }
        defer { api.EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard api.EVP_PKEY_keygen_init(context) == 1, api.EVP_PKEY_CTX_set_group_name(context, "prime256v1") == 1,
            api.EVP_PKEY_generate(context, &made) == 1, let made
        else { throw refusal(api, "P-256 key generation") }
        return try DPoPKey(api: api, key: made)
    }

    /// The key whose private scalar (32 bytes, big-endian) and public point (65 bytes,
    /// uncompressed) are given, as ``privateScalar()`` and ``publicPoint`` gave them.
    package convenience init(privateScalar: [UInt8], publicPoint: [UInt8]) throws(Failure) {
        guard let api = CryptoLibrary.api else { throw .libraryUnavailable }
        guard privateScalar.count == 32, publicPoint.count == 65, publicPoint.first == 0x04 else {
            throw .refused("a P-256 key is a 32-byte scalar and a 65-byte point")
        }
        guard let builder = api.OSSL_PARAM_BLD_new() else { throw Self.refusal(api, "parameters") }
        defer { api.OSSL_PARAM_BLD_free(builder) }
        let scalar = privateScalar.withUnsafeBufferPointer { api.BN_bin2bn($0.baseAddress, 32, nil) }
        defer { api.BN_clear_free(scalar) }
        let made: OpaquePointer? = publicPoint.withUnsafeBytes { point in
            guard let scalar, api.OSSL_PARAM_BLD_push_utf8_string(builder, Self.groupName, Self.curveName, 0) == 1,
                api.OSSL_PARAM_BLD_push_BN(builder, Self.privateName, scalar) == 1,
                api.OSSL_PARAM_BLD_push_octet_string(builder, Self.publicName, point.baseAddress, point.count) == 1,
                let parameters = api.OSSL_PARAM_BLD_to_param(builder)
            else { return nil }
            defer { api.OSSL_PARAM_free(parameters) }
            guard let context = api.EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
            defer { api.EVP_PKEY_CTX_free(context) }
            var made: OpaquePointer?
            guard api.EVP_PKEY_fromdata_init(context) == 1,
                api.EVP_PKEY_fromdata(context, &made, tokenstore_evp_pkey_keypair_selection(), parameters) == 1
            else { return nil }
            return made
        }
        guard let made else { throw Self.refusal(api, "P-256 key import") }
        try self.init(api: api, key: made)
        // libcrypto keeps the point it is given without checking it against the scalar: a
        // signature by the scalar that the point verifies proves they are one key pair.
        let probe = Array("tokenstore dpop key check".utf8)
        guard try verify(signatureDER: signDER(probe), message: probe) else {
            throw .refused("the public point is not the scalar's")
        }
    }

    private init(api: tokenstore_crypto, key: OpaquePointer) throws(Failure) {
        self.api = api
        self.key = key
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        let status = point.withUnsafeMutableBufferPointer {
            api.EVP_PKEY_get_octet_string_param(key, Self.publicName, $0.baseAddress, 65, &length)
        }
        guard status == 1, length == 65, point[0] == 0x04 else {
            api.EVP_PKEY_free(key)
            throw Self.refusal(api, "P-256 public point")
        }
        publicKey = DPoPPublicKey(point: point)
    }

    deinit {
        api.EVP_PKEY_free(key)
    }

    /// The private scalar, 32 bytes big-endian, for the store to seal. The caller wipes it.
    package func privateScalar() throws(Failure) -> [UInt8] {
        var number: OpaquePointer?
        guard api.EVP_PKEY_get_bn_param(key, Self.privateName, &number) == 1, let number else {
            throw Self.refusal(api, "P-256 private scalar")
        }
        defer { api.BN_clear_free(number) }
        var scalar = [UInt8](repeating: 0, count: 32)
        let written = scalar.withUnsafeMutableBufferPointer { api.BN_bn2binpad(number, $0.baseAddress, 32) }
        guard written == 32 else { throw Self.refusal(api, "P-256 private scalar") }
        return scalar
    }

    /// The ES256 signature of `message`: r‖s, 64 bytes.
    package func sign(_ message: [UInt8]) throws(Failure) -> [UInt8] {
        guard let raw = try Self.rawSignature(der: signDER(message)[...]) else { throw Self.refusal(api, "ES256 signing") }
        return raw
    }

    /// The ES256 signature of `message`: r‖s, 64 bytes (``sign(_:)``).
    package func signES256(_ message: [UInt8]) throws(Failure) -> [UInt8] { try sign(message) }

    private func verify(signatureDER: [UInt8], message: [UInt8]) -> Bool {
        defer { api.ERR_clear_error() }
        guard let context = api.EVP_MD_CTX_new() else { return false }
        defer { api.EVP_MD_CTX_free(context) }
        guard api.EVP_DigestVerifyInit_ex(context, nil, "SHA256", nil, nil, key, nil) == 1 else { return false }
        return signatureDER.withUnsafeBufferPointer { signature in
            message.withUnsafeBufferPointer { input in
                api.EVP_DigestVerify(context, signature.baseAddress, signature.count, input.baseAddress, input.count)
            }
        } == 1
    }

    private func signDER(_ message: [UInt8]) throws(Failure) -> [UInt8] {
        guard let context = api.EVP_MD_CTX_new() else { throw Self.refusal(api, "digest context") }
        defer { api.EVP_MD_CTX_free(context) }
        guard api.EVP_DigestSignInit_ex(context, nil, "SHA256", nil, nil, key, nil) == 1 else {
            throw Self.refusal(api, "ES256 signing")
        }
        var der = [UInt8](repeating: 0, count: 80)  // a P-256 ECDSA DER signature is at most 72 bytes
        var length = der.count
        let status = der.withUnsafeMutableBufferPointer { output in
            message.withUnsafeBufferPointer { input in
                api.EVP_DigestSign(context, output.baseAddress, &length, input.baseAddress, input.count)
            }
        }
        guard status == 1 else { throw Self.refusal(api, "ES256 signing") }
        return Array(der[0..<length])
    }

    /// r‖s (32 bytes each) from `SEQUENCE { INTEGER r, INTEGER s }`, or nil when `der` is not that.
    static func rawSignature(der: ArraySlice<UInt8>) -> [UInt8]? {
        var bytes = Array(der)[...]
        guard bytes.popFirst() == 0x30, let total = bytes.popFirst(), total < 0x80, Int(total) == bytes.count else {
            return nil
        }
        var out: [UInt8] = []
        for _ in 0..<2 {
            guard bytes.popFirst() == 0x02, let count = bytes.popFirst(), count > 0, Int(count) <= bytes.count else {
                return nil
            }
            var integer = Array(bytes.prefix(Int(count)))
            bytes = bytes.dropFirst(Int(count))
            while integer.count > 32, integer.first == 0 { integer.removeFirst() }
            guard integer.count <= 32 else { return nil }
            out += [UInt8](repeating: 0, count: 32 - integer.count) + integer
        }
        return bytes.isEmpty ? out : nil
    }

    private static func refusal(_ api: tokenstore_crypto, _ what: String) -> Failure {
        api.ERR_clear_error()
        return .refused("libcrypto refused the \(what)")
    }

    // The builder keeps these pointers until `OSSL_PARAM_BLD_to_param` (see RSAPublicKey).
    private static var groupName: UnsafePointer<CChar> { cString("group") }
    private static var curveName: UnsafePointer<CChar> { cString("prime256v1") }
    private static var privateName: UnsafePointer<CChar> { cString("priv") }
    private static var publicName: UnsafePointer<CChar> { cString("pub") }

    private static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
