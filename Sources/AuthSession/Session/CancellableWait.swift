import TokenStore

/// A wait that a task cancellation ends at once, while what it waits for runs on.
///
/// For work that must not stop halfway once it has started (a refresh whose rotated refresh
/// token must be stored, a turn in a queue that must keep its place): the caller is released
/// with ``AuthSessionError/Code/cancelled`` the moment its task is cancelled, and the work
/// finishes on its own.
enum CancellableWait {
    /// The result of `outcome` (an await of other work), or `cancelled` as soon as the calling
    /// task is cancelled (also when it already was).
    static func value<T: Sendable>(
        _ what: String, of outcome: @escaping @Sendable () async -> Result<T, any Error>
    ) async throws -> T {
        let waiter = Waiter<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiter.install(continuation)
                Task { waiter.resume(with: await outcome()) }
            }
        } onCancel: {
            waiter.resume(with: .failure(AuthSessionError(.cancelled, "\(what) was cancelled.")))
        }
    }

    /// The continuation, resumed once by whichever comes first: the outcome or the cancellation.
    private final class Waiter<T: Sendable>: Sendable {
        private let state = Locked<(continuation: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?, done: Bool)>(
            (nil, nil, false))

        func install(_ continuation: CheckedContinuation<T, any Error>) {
            let early: Result<T, any Error>? = state.withLock { state in
                if let early = state.early {
                    state.done = true
                    return early
                }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        func resume(with result: Result<T, any Error>) {
            let continuation: CheckedContinuation<T, any Error>? = state.withLock { state in
                guard !state.done else { return nil }
                guard let continuation = state.continuation else {
                    if state.early == nil { state.early = result }  // before install: kept for it
                    return nil
                }
                state.done = true
                state.continuation = nil
                return continuation
            }
            continuation?.resume(with: result)
        }
    }
}
