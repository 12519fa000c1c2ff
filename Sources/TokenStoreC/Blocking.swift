import Dispatch
import Synchronization

/// Runs an async session call to completion on the concurrency pool and blocks the calling
/// C thread until it ends. The session's own time-outs (per request, per keyring call) bound
/// the wait. The caller's thread is not a pool thread, so blocking it cannot starve the pool;
/// calling in from a Swift task's thread is not supported (no C caller does).
enum Blocking {
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        guard let outcome = result.withLock({ $0 }) else { throw CancellationError() }
        return try outcome.get()
    }
}
