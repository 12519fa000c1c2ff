import FoundationEssentials
import TokenStore

/// The session layer's one route to the store: a store call's `TokenStoreError` becomes
/// `AuthSessionError.storage` (the "storage" group of the MSAL-style errors), and synchronous
/// store work runs on the package's ``BlockingExecutor`` so an `async` caller holds no
/// cooperative thread while a transaction waits on a lock, the disk or the keyring.
enum StoreWork {
    /// `body` (store calls) with its store error as `AuthSessionError.storage`.
    @discardableResult
    static func run<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as TokenStoreError { throw AuthSessionError.storage(error) }
    }

    /// As ``run(_:)-(()->T)``, for `async` store calls (``TokenStore/async``, ``SessionLedger/async``).
    @discardableResult
    static func run<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as TokenStoreError { throw AuthSessionError.storage(error) }
    }

    /// Synchronous store work (`body`, which may make several store calls) on the package's
    /// ``BlockingExecutor``: the calling task is suspended meanwhile. A body that has started runs
    /// to its end, whatever happens to the task.
    @discardableResult
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingExecutor.shared.run { () throws(any Error) -> T in try run(body) }
    }

    /// `body` with `store` on the package's ``BlockingExecutor`` (``TokenStore/onBlockingExecutor(presence:_:)``:
    /// a user-presence check it waits on ends with the calling task), its store error as
    /// `AuthSessionError.storage`. The one route for the session's store reads and small writes.
    @discardableResult
    static func perform<T: Sendable>(on store: TokenStore, _ body: @escaping @Sendable (TokenStore) throws -> T) async throws -> T {
        try await run { try await store.onBlockingExecutor(presence: nil, body) }
    }

    /// A ledger transaction (`body` with `store.ledger`) on the package's ``BlockingExecutor``,
    /// its store error as `AuthSessionError.storage`. A transaction that has started runs to its
    /// end even if the calling task is cancelled: a rotated refresh token the server has just
    /// issued is stored, not lost.
    @discardableResult
    static func transaction<T: Sendable>(on store: TokenStore, _ body: @escaping @Sendable (SessionLedger) throws -> T) async throws -> T {
        let ledger = store.ledger
        return try await blocking { try body(ledger) }
    }
}
