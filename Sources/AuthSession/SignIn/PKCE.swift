import TokenStore

/// Proof Key for Code Exchange (RFC 7636) with the `S256` method, as Auth0.swift makes it.
///
/// The verifier is 32 random bytes in base64url (43 characters), kept in ``SecretBytes``: it
/// goes only into the token request (`code_verifier`, as a `FormValue.secret`). The
/// challenge, `BASE64URL(SHA256(ASCII(verifier)))`, goes into the authorization URL.
///
/// ```swift
/// let pkce = PKCE()
/// query.append(URLQueryItem(name: "code_challenge", value: pkce.challenge))
/// query.append(URLQueryItem(name: "code_challenge_method", value: PKCE.method))
/// ```
struct PKCE: Sendable {
    /// The `code_challenge_method`.
    static let method = "S256"
    /// The number of random bytes behind the verifier.
    static let verifierByteCount = 32

    /// The `code_verifier`: 43 ASCII characters of base64url. Sent only to the token endpoint.
    let verifier: SecretBytes
    /// The `code_challenge`: base64url of the SHA-256 of the verifier's ASCII.
    let challenge: String

    /// A fresh verifier from libsodium's CSPRNG and its challenge.
    init() {
        var random = SignInRandom.bytes(Self.verifierByteCount)
        self.init(randomBytes: random)
        Self.wipe(&random)
    }

    /// The verifier made of `randomBytes` (RFC 7636 Appendix B gives a known answer).
    init(randomBytes: [UInt8]) {
        var ascii = Base64URL.encodeToASCII(randomBytes)
        verifier = SecretBytes(ascii)
        challenge = Base64URL.encode(SHA256Digest.hash(ascii))
        Self.wipe(&ascii)
    }

    /// The S256 challenge of `verifier` (what the authorization server recomputes).
    static func challenge(forVerifier verifier: String) -> String {
        Base64URL.encode(SHA256Digest.hash(Array(verifier.utf8)))
    }

    private static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices { buffer[index] = 0 }
        }
    }
}
