import FoundationEssentials
import TokenStore

extension TokenSession {
    /// The OAuth errors of an authorization redirect that say the request itself is wrong
    /// (RFC 6749 §4.1.2.1): a configuration error, not a user who declined.
    static let configurationErrors: Set<String> = [
        "invalid_scope", "unauthorized_client", "invalid_request", "unsupported_response_type",
    ]

    /// `error` as thrown by the sign-in wait, with a redirect `error=` that names a
    /// configuration error turned into ``AuthSessionError/Code/authorizationMisconfigured``
    /// (the server's text kept as untrusted detail).
    static func configurationError(_ error: any Error) -> any Error {
        guard let failure = error as? AuthSessionError, failure.code == .authorizationFailed,
            let oauthError = failure.oauthError, configurationErrors.contains(oauthError)
        else { return error }
        return AuthSessionError(
            .authorizationMisconfigured,
            "The authorization server refused the sign-in request as misconfigured (\(oauthError)): check the "
                + "client id, redirect URIs and scopes registered there.",
            oauthError: oauthError, oauthErrorDescription: failure.oauthErrorDescription)
    }

    /// RFC 9207: when the server says its redirects carry `iss`, the redirect's `iss` must be
    /// its issuer exactly; otherwise an `iss`, if present, must still be it.
    /// - Throws: ``AuthSessionError/Code/issuerMismatch`` before the code is used.
    static func checkIssuer(_ callback: AuthorizationCallback, metadata: AuthorizationServerMetadata) throws {
        if let received = callback.issuer {
            guard received == metadata.issuer else {
                throw AuthSessionError(.issuerMismatch, "The sign-in redirect names another issuer (RFC 9207).")
            }
        } else if metadata.authorizationResponseIssParameterSupported {
            throw AuthSessionError(.issuerMismatch, "The sign-in redirect carries no issuer, though the server sends one (RFC 9207).")
        }
    }
}
