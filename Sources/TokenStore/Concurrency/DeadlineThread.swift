import Dispatch

/// Runs one blocking call that may never return on a thread of its own, and waits for it at most
/// a time-out: the one place the package abandons a call to a party that does not answer.
///
/// Its users are the calls with no time-out of their own: libsecret's `_sync` calls, which block
/// until the Secret Service answers (``GLibWorkerThread``), and a TPM session, whose ESYS calls
/// wait without limit (``TPMDeadline``). When the time-out passes the caller gets
/// ``Outcome/timedOut`` at once and the call is abandoned, not killed: `onAbandon` runs as it is
/// declared abandoned, and the call keeps its thread until it returns, then `onLate` runs on that
/// thread, always after `onAbandon` (a late result is dropped; a late ``SecretBytes`` wipes
/// itself). A result that arrives while the time-out is being declared wins: the caller gets
/// it, and neither runs.
///
/// A fresh thread per call, not ``BlockingExecutor``: an abandoned call may keep its thread
/// indefinitely, and the shared executor's few threads must not be lost to a silent service.
enum DeadlineThread {
    /// How a call ended, as its caller sees it.
    enum Outcome<R> {
        /// It returned within the time-out.
        case finished(Result<R, TokenStoreError>)
        /// It did not; it is abandoned (`onAbandon` ran) and `onLate` runs when it returns.
        case timedOut
        /// No thread could be made (`pthread_create`'s error number); `work` never ran.
        case noThread(errno: Int32)
    }

    /// `work` on a new thread named `name`, its result if it returns within `timeout`.
    static func run<R>(
        name: String, timeout: Duration,
        onAbandon: () -> Void = {}, onLate: @escaping @Sendable () -> Void = {},
        _ work: @escaping () -> Result<R, TokenStoreError>
    ) -> Outcome<R> {
        let call = Call(work: work, onLate: onLate)
        let started = DetachedThread.starting(name: name) { call.execute() }
        guard started == 0 else { return .noThread(errno: started) }
        if call.done.wait(timeout: .now() + timeout.dispatchInterval) == .success, let result = call.result {
            return .finished(result)
        }
        let late = call.state.withLock { state -> Result<R, TokenStoreError>? in
            if state.result == nil {
                state.abandoned = true
                onAbandon()  // under the call's lock: before the call can finish and run `onLate`
            }
            return state.result
        }
        if let late { return .finished(late) }
        return .timedOut
    }

    // @unchecked Sendable: `work` runs once, on the call's thread; `state` is behind its lock;
    // `done` is signalled once, after the result is set.
    private final class Call<R>: @unchecked Sendable {
        let work: () -> Result<R, TokenStoreError>
        let onLate: @Sendable () -> Void
        let state = Locked((result: Result<R, TokenStoreError>?.none, abandoned: false))
        let done = DispatchSemaphore(value: 0)

        init(work: @escaping () -> Result<R, TokenStoreError>, onLate: @escaping @Sendable () -> Void) {
            self.work = work
            self.onLate = onLate
        }

        var result: Result<R, TokenStoreError>? { state.withLock { $0.result } }

        func execute() {
            let result = work()
            let wasAbandoned = state.withLock { state -> Bool in
                state.result = result
                return state.abandoned
            }
            if wasAbandoned { onLate() }
            done.signal()
        }
    }
}
