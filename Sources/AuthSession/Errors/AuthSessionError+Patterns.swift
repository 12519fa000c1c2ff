import FoundationEssentials
import TokenStore

// The patterns of AuthSessionError: one error per code, for `catch`, `switch` and
// `#expect(throws:)` (split from AuthSessionError.swift, which holds the type and its codes).

extension AuthSessionError {
    /// `catch AuthSessionError.rateLimited`: matches a thrown ``AuthSessionError`` with the code of `pattern`.
    public static func ~= (pattern: AuthSessionError, error: any Error) -> Bool { matches(pattern, error) }

    /// The `TokenStoreError` of a ``Code/storage`` error, so that `catch TokenStoreError.…` matches it.
    package var underlyingError: (any Error)? {
        if case .storage(let error)? = cause { return error }
        return nil
    }

    // One error per code: a pattern for `catch`, `switch` and `#expect(throws:)`, equal to
    // every error with that code.

    /// Matches ``Code/interactionRequired``.
    public static let interactionRequired = Self(.interactionRequired, "The user must sign in again.")
    /// Matches ``Code/serverDeclinedScopes``.
    public static let serverDeclinedScopes = Self(
        .serverDeclinedScopes, "The server granted fewer scopes than requested.")
    /// Matches ``Code/notConnectedToInternet``.
    public static let notConnectedToInternet = Self(.notConnectedToInternet, "The host could not be reached.")
    /// Matches ``Code/timedOut``.
    public static let timedOut = Self(.timedOut, "The request did not complete in time.")
    /// Matches ``Code/rateLimited``.
    public static let rateLimited = Self(.rateLimited, "The server is rate limiting.")
    /// Matches ``Code/serverError``.
    public static let serverError = Self(.serverError, "The server failed.")
    /// Matches ``Code/invalidClient``.
    public static let invalidClient = Self(.invalidClient, "The server rejected the client's credentials.")
    /// Matches ``Code/invalidRequest``.
    public static let invalidRequest = Self(.invalidRequest, "The server rejected the request as malformed.")
    /// Matches ``Code/unsupportedTokenType``.
    public static let unsupportedTokenType = Self(
        .unsupportedTokenType, "The server cannot revoke this kind of token.")
    /// Matches ``Code/invalidGrant``.
    public static let invalidGrant = Self(.invalidGrant, "The server rejected the authorization code.")
    /// Matches ``Code/unexpectedResponse``.
    public static let unexpectedResponse = Self(
        .unexpectedResponse, "The answer was not what the protocol promises.")
    /// Matches ``Code/tlsFailure``.
    public static let tlsFailure = Self(.tlsFailure, "The TLS handshake failed.")
    /// Matches ``Code/cancelled``.
    public static let cancelled = Self(.cancelled, "The operation was cancelled.")
    /// Matches ``Code/insecureConfiguration``.
    public static let insecureConfiguration = Self(
        .insecureConfiguration, "The configuration is refused as insecure.")
    /// Matches ``Code/storage``.
    public static let storage = Self(.storage, "The token store failed.")
    /// Matches ``Code/authorizationFailed``.
    public static let authorizationFailed = Self(.authorizationFailed, "The authorization server refused the sign-in.")
    /// Matches ``Code/stateMismatch``.
    public static let stateMismatch = Self(.stateMismatch, "Every redirect carried a wrong state.")
    /// Matches ``Code/idTokenInvalid``.
    public static let idTokenInvalid = Self(.idTokenInvalid, "The ID token failed validation.")
    /// Matches ``Code/loopbackUnavailable``.
    public static let loopbackUnavailable = Self(.loopbackUnavailable, "No loopback port could be bound.")
    /// Matches ``Code/browserUnavailable``.
    public static let browserUnavailable = Self(.browserUnavailable, "No browser could be opened.")
    /// Matches ``Code/userChanged``.
    public static let userChanged = Self(.userChanged, "The sign-in was of another user than the account's.")
    /// Matches ``Code/minimumTTLTooLarge``.
    public static let minimumTTLTooLarge = Self(
        .minimumTTLTooLarge, "The minimum TTL is longer than the server's access tokens live.")
    /// OAuth error codes of RFC 6749, RFC 7009, RFC 9470 and OpenID Connect Core that the sanitizer's
    /// token-like-run rule (24 or more characters) would otherwise redact.
    static let registeredOAuthErrors: Set<String> = [
        "unsupported_response_type", "account_selection_required", "consent_required",
        "interaction_required", "request_uri_not_supported", "registration_not_supported",
        "insufficient_user_authentication",
    ]

    /// Matches ``Code/notRevocable``.
    public static let notRevocable = Self(.notRevocable, "The server cannot revoke refresh tokens.")
    /// Matches ``Code/authorizationMisconfigured``.
    public static let authorizationMisconfigured = Self(
        .authorizationMisconfigured, "The authorization server refused the sign-in request as misconfigured.")
    /// Matches ``Code/issuerMismatch``.
    public static let issuerMismatch = Self(.issuerMismatch, "The sign-in redirect named another issuer.")
    /// Matches ``Code/dpopKeyLost``.
    public static let dpopKeyLost = Self(.dpopKeyLost, "The account's DPoP key is lost; the user must sign in again.")
    /// Matches ``Code/unsupportedByServer``.
    public static let unsupportedByServer = Self(.unsupportedByServer, "The server does not offer what the call needs.")
    /// Matches ``Code/stepUpRequired``.
    public static let stepUpRequired = Self(.stepUpRequired, "The API asks for a stronger or more recent sign-in.")
    /// Matches ``Code/accessTokenRejected``.
    public static let accessTokenRejected = Self(.accessTokenRejected, "The API refused a renewed access token.")
}
