/// The per-attempt random values of one browser sign-in: PKCE, `state` and `nonce`, each
/// from 32 bytes of libsodium's CSPRNG (as Auth0.swift's WebAuth makes them).
///
/// `state` and `nonce` travel in the authorization URL; they protect against forged
/// redirects and replayed ID tokens. They are secrets of the attempt (anyone who
/// reads them can start an authorization of their own account bound to this attempt), so the
/// authorization URL is never put on a command line (the browser gets the listener's
/// one-time start address) and neither value is ever logged.
struct SignInSecrets: Sendable {
    /// The PKCE verifier and challenge.
    let pkce: PKCE
    /// The `state` the redirect must carry back (43 characters of base64url).
    let state: String
    /// The `nonce` the ID token must carry (43 characters of base64url).
    let nonce: String

    /// Fresh values for one attempt.
    init() {
        pkce = PKCE()
        state = SignInRandom.token()
        nonce = SignInRandom.token()
    }
}
