import FoundationEssentials
import TokenStore

/// One signed-in (or logging-out) account as the session sees it.
public struct SessionAccount: Sendable, CustomStringConvertible {
    /// One access token in the account's cache (metadata only).
    public struct CachedToken: Sendable, Equatable {
        /// The API it is for; `nil` for the tenant's default.
        public let audience: String?
        public let grantedScopes: [String]
        public let expiresAt: Date
    }

    public let account: AccountID
    /// The account's Apple user id, when stored.
    public let userID: String?
    /// The credential state of ``userID`` (`notFound` without one).
    public let state: CredentialState
    /// Whether a refresh token is stored (the user is signed in here).
    public let canRenew: Bool
    /// Whether a logout has begun and not finished (its revocation is pending).
    public let isLoggingOut: Bool
    /// The cached access tokens, most recently stored first.
    public let cachedTokens: [CachedToken]

    public var description: String {
        "SessionAccount(\(account), userID: \(userID == nil ? "absent" : "[redacted]"), state: \(state), "
            + "canRenew: \(canRenew), loggingOut: \(isLoggingOut), cachedTokens: \(cachedTokens.count))"
    }
}

extension TokenSession {
    // MARK: Accounts and credential state

    /// Every account the store holds session entries for, with its user id, credential state
    /// and cached access tokens (MSAL's `allAccounts`). No network.
    public func accounts() throws -> [SessionAccount] {
        try StoreWork.run {
            try store.accounts().map { info in
                let userID = try store.appleUserID(account: info.account)
                return SessionAccount(
                    account: info.account, userID: userID,
                    state: try userID.map { try store.credentialState(forUserID: $0) } ?? .notFound,
                    canRenew: try store.ledger.hasRefreshToken(account: info.account),
                    isLoggingOut: info.isLoggingOut,
                    cachedTokens: try store.ledger.cachedAccessTokens(account: info.account).map {
                        SessionAccount.CachedToken(
                            audience: $0.key.audience, grantedScopes: $0.entry.scopes, expiresAt: $0.entry.expiresAt)
                    })
            }
        }
    }

    /// The credential state of an Apple user id, as Apple's `getCredentialState(forUserID:)`.
    public func credentialState(forUserID userID: String) throws -> CredentialState {
        try StoreWork.run { try store.credentialState(forUserID: userID) }
    }

    /// The recorded changes of an Apple user id's credential state, oldest first.
    public func credentialStateHistory(forUserID userID: String) throws -> [CredentialStateTransition] {
        try StoreWork.run { try store.credentialStateHistory(forUserID: userID) }
    }

    // MARK: Logout

    /// Logs `account` out: revoke the refresh token at the server, then delete the local
    /// entries, then record the credential state — durable at each step, so being offline or
    /// crashing loses nothing (``LogoutOutcome/revocationPending`` when the server could not
    /// be reached: the token is revoked by a later ``resumePendingRevocations(includingNotDue:includingFailed:)``).
    /// The user is recorded `revoked` unless another account of the same Apple user still holds
    /// a refresh token: then it stays `authorized`, and the history records the logout with the
    /// detail ``CredentialStateDetail/otherAccountSignedIn``.
    public func logout(account: AccountID) async throws -> LogoutOutcome {
        try await logoutCoordinator.logout(account: account)
    }

    /// Retries the queued revocations that are due. Call it at start-up and when the network
    /// returns.
    ///
    /// Revocations the server refused for good (flagged: a configuration error, or a captive
    /// portal's or proxy's page in the server's place) are due again after a long backoff
    /// (1 hour, doubling to 24 hours). `includingNotDue` tries every unflagged one now,
    /// `includingFailed` every flagged one. Outbox rows that do not open are skipped and counted
    /// in ``RevocationReport/unreadable``.
    public func resumePendingRevocations(
        includingNotDue: Bool = false, includingFailed: Bool = false
    ) async throws -> RevocationReport {
        try await logoutCoordinator.resumePendingRevocations(
            now: Date(), includingNotDue: includingNotDue, includingFailed: includingFailed)
    }

    /// The refresh tokens waiting to be revoked (logged out here, server not reached yet).
    public func pendingRevocations() throws -> [PendingRevocation] {
        try StoreWork.run { try store.pendingRevocations() }
    }

    /// Gives up on the account's queued revocations explicitly; recorded in the history.
    /// - Warning: the refresh tokens may still be valid at the server.
    @discardableResult
    public func discardPendingRevocations(account: AccountID) async throws -> Int {
        try await logoutCoordinator.discardPendingRevocations(account: account)
    }

    /// Apple said the user withdrew (consent revoked, account deleted; relayed by the app's
    /// backend): every account of `userID` is logged out, and the user recorded `revoked`.
    @discardableResult
    public func handleAppleCredentialRevoked(userID: String) async throws -> [LogoutOutcome] {
        try await logoutCoordinator.handleAppleCredentialRevoked(userID: userID)
    }

    /// Removes the account's local entries without revoking anything (Auth0.swift's
    /// `CredentialsManager.clear()`, MSAL's `removeAccount`): refresh token, user id, cached
    /// access tokens, ID token, profile. The user is recorded `revoked` with reason
    /// `clearedLocally` and detail `notRevokedAtServer`. Revocations already queued stay queued.
    /// - Warning: the refresh token stays valid at the server until it expires; prefer
    ///   ``logout(account:)``.
    /// - Returns: whether anything was removed.
    @discardableResult
    public func clearLocally(account: AccountID) async throws -> Bool {
        try await logoutCoordinator.clearLocally(account: account)
    }
}
