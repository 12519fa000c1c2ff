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
}
