import FoundationEssentials

extension TokenStore {
    /// The `async` forms of the store calls the session layer makes: each runs the synchronous
    /// call on ``BlockingExecutor/shared`` and suspends its caller meanwhile, so `async` code
    /// holds no cooperative thread while a transaction waits on a lock, the disk or the keyring.
    /// The synchronous calls stay (for the C ABI and for apps without tasks).
    package var async: Async { Async(store: self) }

    /// Runs `body` with this store on ``BlockingExecutor/shared`` and suspends the caller until
    /// it returns. A body that has started runs to its end, whatever happens to the task, except
    /// a user-presence check waiting on polkit: the task's cancellation (or `presence`'s, when
    /// given) cancels it at polkit and the read throws `cancelled` (``PresenceCancellation``).
    package func onBlockingExecutor<R: Sendable>(
        presence: PresenceCancellation? = nil, _ body: @escaping @Sendable (TokenStore) throws -> R
    ) async throws -> R {
        try await PresenceCancellation.onBlockingExecutor(presence) { try body(self) }
    }

    /// The `async` forms of a store's calls (``TokenStore/async``).
    package struct Async: Sendable {
        let store: TokenStore

        /// ``TokenStore/refreshToken(account:)`` on the blocking executor.
        package func refreshToken(account: AccountID) async throws -> SecretBytes? {
            try await store.onBlockingExecutor { try $0.refreshToken(account: account) }
        }

        /// ``TokenStore/appleUserID(account:)`` on the blocking executor.
        package func appleUserID(account: AccountID) async throws -> String? {
            try await store.onBlockingExecutor { try $0.appleUserID(account: account) }
        }

        /// ``TokenStore/userProfile(account:)`` on the blocking executor.
        package func userProfile(account: AccountID) async throws -> UserProfile? {
            try await store.onBlockingExecutor { try $0.userProfile(account: account) }
        }

        /// ``TokenStore/performOwedMaintenance()`` on the blocking executor.
        @discardableResult
        package func performOwedMaintenance() async throws -> KeyRotationReport? {
            try await store.onBlockingExecutor { try $0.performOwedMaintenance() }
        }
    }
}
