/// What became of a revocation (`POST /oauth/revoke`, RFC 7009).
public enum RevocationResult: Sendable, CustomStringConvertible {
    /// The server answered 200: the token is revoked (RFC 7009: also when it was unknown or
    /// already revoked, whatever the body).
    case revoked
    /// A transient failure after the retry policy gave up (offline, timed out, 408, 429, 5xx,
    /// TLS, cancelled): keep the token and try again later, not before the error's
    /// `retryAfter` when it has one.
    case retryLater(AuthSessionError)
    /// A failure that retrying will not fix (400 `invalid_request` / `unsupported_token_type`,
    /// 401 `invalid_client`, another 4xx, a redirect): a configuration error to surface.
    case failedPermanently(AuthSessionError)

    /// A stable name for logs and metrics: `revoked`, `retryLater`, `failedPermanently`.
    public var outcome: String {
        switch self {
        case .revoked: return "revoked"
        case .retryLater: return "retryLater"
        case .failedPermanently: return "failedPermanently"
        }
    }

    /// The error, unless revoked.
    public var error: AuthSessionError? {
        switch self {
        case .revoked: return nil
        case .retryLater(let error), .failedPermanently(let error): return error
        }
    }

    /// `revoked`, or the outcome and the error's description (never a token).
    public var description: String {
        switch self {
        case .revoked: return "revoked"
        case .retryLater(let error): return "retryLater(\(error))"
        case .failedPermanently(let error): return "failedPermanently(\(error))"
        }
    }
}
