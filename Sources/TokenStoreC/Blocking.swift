import Dispatch
import TokenStore

/// Runs an async session call to completion on the concurrency pool and blocks the calling
/// C thread until it ends. The session's own time-outs (per request, per keyring call) bound
/// the wait. The caller's thread is not a pool thread, so blocking it cannot starve the pool;
/// calling in from a Swift task's thread is not supported (no C caller does).
///
/// It must block: a C function returns its result to its caller (the ABI's contract); the
/// blocking store work inside the call runs on the package's `BlockingExecutor`.
enum Blocking {
    static func wait<T: Sendable>(cancel: CancelHandle? = nil, _ body: @escaping @Sendable () async throws -> T) throws -> T {
        try wait(serving: nil, open: { _ in false }, cancel: cancel, body)
    }

    /// As ``wait(_:)``, and while blocked the calling thread also serves `requests`: each URL
    /// the call posts there is handed to `open` on this thread (the C caller's), and its answer
    /// goes back to the call. So a C callback runs on the thread that made the call, never on
    /// a Swift thread. A trigger of `cancel` cancels the task the call runs in.
    static func wait<T: Sendable>(
        serving requests: CallerThreadRequests?, open: (String) -> Bool, cancel: CancelHandle? = nil,
        _ body: @escaping @Sendable () async throws -> T
    ) throws -> T {
        let result = Locked<Result<T, any Error>?>(nil)
        let wake = requests?.wake ?? DispatchSemaphore(value: 0)
        let task = Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            wake.signal()
        }
        return try CancelHandle.whileRunning(cancel, onCancel: { task.cancel() }) {
            while true {
                wake.wait()
                requests?.serve(open)
                // The call posts nothing after it ended: nothing can be left unanswered here.
                if let outcome = result.withLock({ $0 }) { return try outcome.get() }
            }
        }
    }
}

/// URLs a call running on the pool asks the blocked C thread to open (see
/// ``Blocking/wait(serving:open:_:)``); each post wakes that thread once.
final class CallerThreadRequests: Sendable {
    let wake = DispatchSemaphore(value: 0)
    private let pending = Locked<[(url: String, reply: CheckedContinuation<Bool, Never>)]>([])

    /// Asks the C thread to open `url`; true when it did.
    func open(_ url: String) async -> Bool {
        await withCheckedContinuation { reply in
            pending.withLock { $0.append((url, reply)) }
            wake.signal()
        }
    }

    /// Answers every pending request with `open` (on the calling thread).
    func serve(_ open: (String) -> Bool) {
        let taken = pending.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        for request in taken { request.reply.resume(returning: open(request.url)) }
    }
}
