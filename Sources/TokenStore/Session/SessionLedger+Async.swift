import FoundationEssentials

extension SessionLedger {
    /// The `async` forms of the ledger's transactions: each runs on ``BlockingExecutor/shared``
    /// and suspends its caller meanwhile (see ``TokenStore/async``). A transaction that has
    /// started runs to its end even if the calling task is cancelled: a rotated refresh token
    /// the server has just issued is stored, not lost.
    package var async: Async { Async(ledger: self) }

    /// The `async` forms of a ledger's transactions (``SessionLedger/async``).
    package struct Async: Sendable {
        let ledger: SessionLedger

        private func run<R: Sendable>(_ body: @escaping @Sendable (SessionLedger) throws -> R) async throws -> R {
            let ledger = ledger
            return try await BlockingExecutor.shared.run { () throws(any Error) -> R in try body(ledger) }
        }

        /// ``SessionLedger/saveSignIn(account:refreshToken:appleUserID:accessToken:cacheKey:identity:dpopThumbprint:endpoints:)`` on the blocking executor.
        @discardableResult
        package func saveSignIn(
            account: AccountID, refreshToken: SecretBytes, appleUserID: String, accessToken: AccessTokenEntry?,
            cacheKey: AccessTokenKey? = nil, identity: SignInIdentity? = nil, dpopThumbprint: String? = nil,
            endpoints: ServerEndpoints? = nil
        ) async throws -> Bool {
            try await run {
                try $0.saveSignIn(
                    account: account, refreshToken: refreshToken, appleUserID: appleUserID, accessToken: accessToken,
                    cacheKey: cacheKey, identity: identity, dpopThumbprint: dpopThumbprint, endpoints: endpoints)
            }
        }

        /// ``SessionLedger/cachedAccessToken(_:)`` on the blocking executor.
        package func cachedAccessToken(_ key: AccessTokenKey) async throws -> AccessTokenEntry? {
            try await run { try $0.cachedAccessToken(key) }
        }

        /// ``SessionLedger/cachedAccessTokens(account:)`` on the blocking executor.
        package func cachedAccessTokens(account: AccountID) async throws -> [CachedAccessToken] {
            try await run { try $0.cachedAccessTokens(account: account) }
        }

        /// ``SessionLedger/hasRefreshToken(account:)`` on the blocking executor.
        package func hasRefreshToken(account: AccountID) async throws -> Bool {
            try await run { try $0.hasRefreshToken(account: account) }
        }

        /// ``SessionLedger/replaceRefreshToken(account:presented:with:accessToken:cacheKey:dropsOtherAccessTokens:endpoints:)`` on the blocking executor.
        package func replaceRefreshToken(
            account: AccountID, presented: SecretBytes, with newRefreshToken: SecretBytes?, accessToken: AccessTokenEntry?,
            cacheKey: AccessTokenKey? = nil, dropsOtherAccessTokens: Bool = false, endpoints: ServerEndpoints? = nil
        ) async throws -> RefreshTokenReplacement {
            try await run {
                try $0.replaceRefreshToken(
                    account: account, presented: presented, with: newRefreshToken, accessToken: accessToken,
                    cacheKey: cacheKey, dropsOtherAccessTokens: dropsOtherAccessTokens, endpoints: endpoints)
            }
        }

        /// ``SessionLedger/rejectRefreshToken(account:presented:)`` on the blocking executor.
        @discardableResult
        package func rejectRefreshToken(account: AccountID, presented: SecretBytes) async throws -> Bool {
            try await run { try $0.rejectRefreshToken(account: account, presented: presented) }
        }

        /// ``SessionLedger/clearLocally(account:reason:)`` on the blocking executor.
        @discardableResult
        package func clearLocally(account: AccountID, reason: CredentialStateReason = .clearedLocally) async throws -> Bool {
            try await run { try $0.clearLocally(account: account, reason: reason) }
        }
    }
}
