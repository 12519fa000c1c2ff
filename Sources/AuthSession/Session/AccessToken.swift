import FoundationEssentials
import TokenStore

/// An access token handed to the app: the token, the API it is for, its expiry, and the
/// scopes the server granted and declined.
public struct AccessToken: Sendable, CustomStringConvertible {
    /// Where the token came from.
    public enum Source: String, Sendable {
        /// The store's sealed access-token cache (no network).
        case cache
        /// A refresh at the authorization server.
        case network
        /// The sign-in exchange.
        case signIn
    }

    /// The token. Put it in a request with ``authorizationHeaderValue()``.
    public let token: SecretBytes
    /// When the token expires; `nil` when the server did not say (`expires_in` absent): such
    /// a token is handed on but never cached.
    public let expiresAt: Date?
    /// The API the token is for (`audience`), `nil` for the tenant's default.
    public let audience: String?
    /// The scopes the server granted.
    public let grantedScopes: [String]
    /// Scopes asked for and not granted. A call that cannot go on without some scopes asks
    /// for them with `requiringScopes:` and gets ``AuthSessionError/Code/serverDeclinedScopes``.
    public let declinedScopes: [String]
    public let source: Source
    /// `DPoP` for a token bound to the store's DPoP key (RFC 9449: send it with a proof from
    /// ``TokenSession/dpopProof(method:url:accessToken:)``), otherwise `Bearer`. Kept with the
    /// cached token, so a token from the cache says it too.
    public let tokenType: String

    package init(
        token: SecretBytes, expiresAt: Date?, audience: String?, grantedScopes: [String], declinedScopes: [String],
        source: Source, tokenType: String? = nil
    ) {
        self.tokenType = Self.normalizedType(tokenType)
        self.token = token
        self.expiresAt = expiresAt
        self.audience = audience
        self.grantedScopes = grantedScopes
        self.declinedScopes = declinedScopes
        self.source = source
    }

    /// The value of an HTTP `Authorization` header: `Bearer <token>`, or `DPoP <token>` for a
    /// DPoP-bound one (``tokenType``). This is the one place the token becomes a `String`:
    /// send it, do not keep or log it.
    public func authorizationHeaderValue() -> String {
        tokenType + " " + (token.stringValue() ?? "")
    }

    /// `DPoP` for a server's `token_type` of DPoP in any case, `Bearer` otherwise.
    static func normalizedType(_ type: String?) -> String {
        type?.lowercased() == "dpop" ? "DPoP" : "Bearer"
    }

    /// Whether the token is still valid for at least `minimumTTL` (false without an expiry).
    public func isValid(minimumTTL: Duration = .zero, now: Date = Date()) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt.timeIntervalSince(now) >= minimumTTL.timeInterval
    }

    public var description: String {
        "AccessToken(\(token), expires \(expiresAt.map { "\($0)" } ?? "unknown"), "
            + "audience \(audience ?? "default"), scopes \(grantedScopes.joined(separator: " ")), "
            + "from \(source.rawValue), \(tokenType))"
    }
}

/// The result of a sign-in.
public struct SignInResult: Sendable {
    /// The access token, also cached (sealed) in the store.
    public let accessToken: AccessToken
    /// The validated ID token, also kept (sealed) in the store.
    public let idToken: SecretBytes?
    /// Scopes asked for but not granted.
    public let declinedScopes: [String]
    /// Who signed in: the Apple user id, the ID token's `sub`, and the name and email the
    /// store keeps for the account (see ``TokenSession/userProfile(account:)``).
    public let profile: UserProfile
}

/// What a logout did.
public enum LogoutOutcome: Sendable, Equatable, CustomStringConvertible {
    /// Nothing was stored for the account; no network call was made.
    case notFound
    /// The refresh token was revoked at the server and the local entries deleted.
    case revoked
    /// Logged out here; the token is in the outbox, to be revoked when the server is reachable.
    case revocationPending
    /// Logged out here; the server refused the revocation for good (a configuration error).
    /// The token stays in the outbox, flagged, for the app to surface.
    case revocationFailed(AuthSessionError.Code)
    /// Logged out here; the server has no revocation endpoint (its discovery document names
    /// none, as Microsoft Entra's), so the refresh token was deleted locally, never revoked,
    /// and nothing was queued. The history records reason `notRevocable`.
    case notRevocable

    public var description: String {
        switch self {
        case .notFound: return "notFound"
        case .revoked: return "revoked"
        case .revocationPending: return "revocationPending"
        case .revocationFailed(let code): return "revocationFailed(\(code.rawValue))"
        case .notRevocable: return "notRevocable"
        }
    }
}

/// What ``TokenSession/resumePendingRevocations(includingNotDue:includingFailed:)`` did.
public struct RevocationReport: Sendable, Equatable, CustomStringConvertible {
    /// Entries revoked at the server and removed from the outbox.
    public var revoked = 0
    /// Entries that failed transiently again and stay queued.
    public var stillPending = 0
    /// Entries the server refused for good (flagged, kept).
    public var failed = 0
    /// Entries not yet due, left alone (flagged ones waiting out their long backoff included).
    public var notDue = 0
    /// Outbox rows that do not open (tampered or damaged), skipped: their tokens cannot be
    /// revoked. List them with `TokenStore`'s outbox listing; discard one explicitly by id.
    public var unreadable = 0

    public var description: String {
        "revoked=\(revoked) stillPending=\(stillPending) failed=\(failed) notDue=\(notDue) unreadable=\(unreadable)"
    }

    mutating func count(_ outcome: LogoutOutcome) {
        switch outcome {
        case .revoked, .notFound, .notRevocable: revoked += 1
        case .revocationPending: stillPending += 1
        case .revocationFailed: failed += 1
        }
    }
}
