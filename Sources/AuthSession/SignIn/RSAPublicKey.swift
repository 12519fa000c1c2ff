internal import CCrypto

/// An RSA public key held by OpenSSL's libcrypto, for RS256 verification (RSASSA-PKCS1-v1_5
/// with SHA-256), built from a JWK's modulus and exponent with the OpenSSL 3 EVP API
/// (libcrypto loaded at the first key, ``CryptoLibrary``).
// @unchecked Sendable: the EVP_PKEY is never changed after init, and OpenSSL 3 lets several
// threads verify with one key at once, each call with its own EVP_MD_CTX.
final class RSAPublicKey: @unchecked Sendable {
    private let key: OpaquePointer
    private let api: tokenstore_crypto
    /// The modulus size in bits.
    let bits: Int

    /// The key with modulus `n` and public exponent `e` (big-endian bytes), or `nil` when
    /// libcrypto refuses them or cannot be loaded.
    init?(modulus: [UInt8], exponent: [UInt8]) {
        guard let api = CryptoLibrary.api else { return nil }
        self.api = api
        guard !modulus.isEmpty, !exponent.isEmpty, let builder = api.OSSL_PARAM_BLD_new() else { return nil }
        defer { api.OSSL_PARAM_BLD_free(builder) }
        let n = modulus.withUnsafeBufferPointer { api.BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let e = exponent.withUnsafeBufferPointer { api.BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        defer {
            api.BN_free(n)
            api.BN_free(e)
        }
        guard let n, let e, api.OSSL_PARAM_BLD_push_BN(builder, Self.modulusName, n) == 1,
            api.OSSL_PARAM_BLD_push_BN(builder, Self.exponentName, e) == 1, let parameters = api.OSSL_PARAM_BLD_to_param(builder)
        else {
            api.ERR_clear_error()
            return nil
        }
        defer { api.OSSL_PARAM_free(parameters) }
        guard let context = api.EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else {
            api.ERR_clear_error()
            return nil
        }
        defer { api.EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard api.EVP_PKEY_fromdata_init(context) == 1,
            api.EVP_PKEY_fromdata(context, &made, tokenstore_evp_pkey_public_key_selection(), parameters) == 1,
            let made
        else {
            api.ERR_clear_error()
            return nil
        }
        key = made
        bits = Int(api.EVP_PKEY_get_bits(made))
    }

    deinit {
        api.EVP_PKEY_free(key)
    }

    // The builder keeps the name pointers until `OSSL_PARAM_BLD_to_param`: they must outlive
    // the call that passes them, which a Swift string bridged to `char *` does not (a
    // static string's bytes live as long as the program).
    private static var modulusName: UnsafePointer<CChar> { cString("n") }
    private static var exponentName: UnsafePointer<CChar> { cString("e") }

    private static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// True when `signature` is a valid RS256 signature of `message` under this key.
    func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
        // libcrypto leaves the reason of a failed verification in this thread's error queue:
        // clear it so it cannot surface in another library's error report.
        defer { api.ERR_clear_error() }
        guard let context = api.EVP_MD_CTX_new() else { return false }
        defer { api.EVP_MD_CTX_free(context) }
        // For an RSA key the default padding is PKCS#1 v1.5.
        guard api.EVP_DigestVerifyInit_ex(context, nil, "SHA256", nil, nil, key, nil) == 1 else { return false }
        let status = signature.withUnsafeBufferPointer { signatureBytes in
            message.withUnsafeBufferPointer { messageBytes in
                api.EVP_DigestVerify(
                    context, signatureBytes.baseAddress, signatureBytes.count, messageBytes.baseAddress,
                    messageBytes.count)
            }
        }
        return status == 1
    }
}
