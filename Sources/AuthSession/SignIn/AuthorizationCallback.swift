import FoundationEssentials
import TokenStore

/// The answer of a browser sign-in, as the loopback listener received it: the
/// authorization code of a redirect whose `state` matched.
///
/// Exchange the code at once (`grant_type=authorization_code` with the PKCE verifier and
/// the same ``redirectURI``): it is short-lived and works once.
struct AuthorizationCallback: Sendable {
    /// The authorization code, kept out of `String` (send it as a `FormValue.secret`).
    let code: SecretBytes
    /// The redirect URI the listener answered on, such as `http://127.0.0.1:53682/callback`:
    /// the token request must carry exactly this value.
    let redirectURI: URL
    /// The redirect's `iss` parameter (RFC 9207), when it carried one.
    var issuer: String? = nil
}
