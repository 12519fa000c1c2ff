import FoundationEssentials

/// A refresh token waiting to be revoked at the authorization server.
public struct PendingRevocation: Sendable {
    /// The entry's random id (hex).
    public let id: String
    /// The account that was logged out.
    public let account: AccountID
    /// The Apple user id of the account, when it was known.
    public let appleUserID: String?
    /// The token to revoke: for the package's logout outbox only, never handed to an app.
    package let refreshToken: SecretBytes
    /// The reason recorded when the logout completes.
    public let reason: CredentialStateReason
    /// The server the token was issued by and its revocation endpoint then (``ServerEndpoints``):
    /// where it is revoked; `nil` for an entry queued before endpoints were recorded.
    package let endpoints: ServerEndpoints?
    public let attempts: Int
    public let nextAttemptAt: Date
    /// The last error's code and short description (never a token).
    public let lastError: String?
    /// Set when the server refused the revocation for good (a configuration error), for the app to surface.
    public let failureCode: String?
    public let createdAt: Date
}

/// An outbox row that does not open (tampered, damaged, or under a key the store does not
/// use): its token cannot be revoked. It is listed so that it can be seen and, explicitly,
/// discarded by id (`SessionLedger.discardUnreadablePendingRevocation(id:)`, a package API).
package struct UnreadablePendingRevocation: Sendable, Equatable {
    /// The entry's random id (hex): the only thing known about it besides its creation time.
    package let id: String
    /// Why it does not open (no secret, no identifier).
    package let reason: String
    /// When the entry was queued, as the row says (unauthenticated).
    package let createdAt: Date
}

/// The outbox: the entries that open, and the rows that do not.
package struct PendingRevocationList: Sendable {
    /// The entries, oldest first.
    package var entries: [PendingRevocation]
    /// The rows that did not open, oldest first; one bad row never hides the others.
    package var unreadable: [UnreadablePendingRevocation]
}

/// What ``SessionLedger/beginLogout(account:reason:)`` found and did.
package enum LogoutPreparation: Sendable {
    /// Nothing is stored for the account, and nothing is pending.
    case nothingStored
    /// The account has local entries but no refresh token: only local clean-up is left.
    case localOnly(appleUserID: String?)
    /// The refresh token moved to the outbox (and entries already pending for the account are included).
    case queued([PendingRevocation])
}

/// The result of one attempt to revoke a pending entry.
package enum RevocationAttemptResult: Sendable {
    /// The server revoked it (or never knew it): the entry is deleted.
    case revoked
    /// A transient failure: try again at `nextAttemptAt`.
    case retryLater(error: String, nextAttemptAt: Date)
    /// A failure the server called permanent (a configuration error, or a captive portal's or
    /// proxy's page in its place): the entry is kept, flagged with `code`, and tried again at
    /// `nextAttemptAt` (a long backoff).
    case failedPermanently(code: String, error: String, nextAttemptAt: Date)
}

/// Where a cached access token is filed: its account, the API it is for (`audience`, `nil`
/// for the tenant's default) and the scope set it was asked for (sorted, without
/// `offline_access`, which belongs to the refresh token).
package struct AccessTokenKey: Sendable, Hashable {
    package let account: AccountID
    package let audience: String?
    package let scopes: [String]

    package init(account: AccountID, audience: String?, scopes: [String]) {
        self.account = account
        self.audience = (audience?.isEmpty ?? true) ? nil : audience
        self.scopes = Array(Set(scopes).subtracting(["offline_access"])).sorted()
    }

    /// The canonical scope set, space-separated.
    var scopeSet: String { scopes.joined(separator: " ") }
}

/// A cached access token with its expiry, granted and declined scopes.
package struct AccessTokenEntry: Sendable {
    package let token: SecretBytes
    package let expiresAt: Date
    /// The scopes the server granted.
    package let scopes: [String]
    /// The scopes asked for and not granted.
    package let declinedScopes: [String]
    /// The token's `token_type` as the server gave it, `DPoP` for a DPoP-bound one; `nil` for
    /// Bearer (and for every entry cached before schema version 12).
    package let tokenType: String?

    package init(
        token: SecretBytes, expiresAt: Date, scopes: [String], declinedScopes: [String] = [], tokenType: String? = nil
    ) {
        self.token = token
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.declinedScopes = declinedScopes
        self.tokenType = tokenType
    }

    var attributes: ItemAttributes { ItemAttributes(expiresAt: expiresAt, scopes: scopes) }

    /// Whether the store accepts this entry in its cache (size, scopes, expiry within the
    /// store's limits). A session stores a refresh token without the cache entry rather than
    /// lose the refresh token over an access token it cannot cache.
    package var isCacheable: Bool {
        (try? validate()) != nil
    }

    func validate() throws {
        try TokenStore.validate(secret: token, attributes: attributes)
        try TokenStore.validate(scopes: declinedScopes)
    }
}

/// A cached access token with where it is filed.
package struct CachedAccessToken: Sendable {
    package let key: AccessTokenKey
    package let entry: AccessTokenEntry
    package let updatedAt: Date
}

/// What ``SessionLedger/replaceRefreshToken(account:presented:with:accessToken:)`` did.
package enum RefreshTokenReplacement: Sendable, Equatable {
    /// The new tokens are stored; the old refresh token is gone.
    case stored
    /// The account was logged out (or signed in anew) meanwhile: nothing was stored for it,
    /// and a new refresh token, if any, was queued for revocation.
    case superseded
}

/// What a validated ID token adds to a sign-in: the token itself and the profile it carries.
package struct SignInIdentity: Sendable {
    package let idToken: SecretBytes
    package let profile: UserProfile

    package init(idToken: SecretBytes, profile: UserProfile) {
        self.idToken = idToken
        self.profile = profile
    }
}
