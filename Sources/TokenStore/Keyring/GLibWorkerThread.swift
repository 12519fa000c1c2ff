internal import CGIO
internal import CLibSecret
import Dispatch

/// Runs one blocking GLib/libsecret call on a thread of its own, bounded by a time limit.
///
/// libsecret's `_sync` calls block until the Secret Service answers and have no timeout of
/// their own. Each call gets a fresh thread (never the caller's) and a `GCancellable`; when
/// the time limit passes, the cancellable is cancelled and the caller gets `timedOut` at
/// once. The worker finishes on its own: it owns every GLib object it creates and frees
/// them, and a late result is dropped (a late ``SecretBytes`` wipes itself).
///
/// A fresh thread per call, not ``BlockingExecutor``: a call past its time limit is abandoned
/// and keeps its thread until libsecret returns, so a hung Secret Service would take a bounded
/// executor's threads one by one (the async store calls wait here from the executor's threads).
enum GLibWorkerThread {
    /// Runs `body` on a new thread and waits at most `timeout` for it.
    ///
    /// - Parameters:
    ///   - operation: a short name for error messages, such as `load key`.
    ///   - body: the blocking work. It receives the cancellable to pass to every GLib call
    ///     and must free everything it allocates before it returns.
    /// - Throws: whatever `body` throws, or ``TokenStoreError`` `timedOut`, `ioError` (no thread).
    static func run<T: Sendable>(
        _ operation: String, timeout: Duration,
        _ body: @escaping @Sendable (GLibCancellable) throws(TokenStoreError) -> T
    ) throws(TokenStoreError) -> T {
        // Before any worker runs libsecret: its GTypes must be registered once, not in a race.
        guard !SecretServiceItems.registeredTypes.contains(0) else {
            throw TokenStoreError(.ioError, "libsecret's types could not be registered (\(GLibError.inWords(operation))).")
        }
        let job = Job<T>(cancellable: GLibCancellable(), body: body)
        let context = Unmanaged.passRetained(job).toOpaque()
        var spawnError: UnsafeMutablePointer<GError>?
        let thread = g_thread_try_new("tokenstore-secret", { raw in
            let job = Unmanaged<AnyJob>.fromOpaque(raw!).takeRetainedValue()
            job.execute()
            return nil
        }, context, &spawnError)
        guard let thread else {
            Unmanaged<Job<T>>.fromOpaque(context).release()
            let cause = GLibError.take(spawnError)
            throw TokenStoreError(
                .ioError, "Could not start a thread for the Secret Service call (\(GLibError.inWords(operation))).",
                cause: cause)
        }
        g_thread_unref(thread)  // detached: the thread frees itself when `execute` returns

        if job.done.wait(timeout: .now() + timeout.dispatchInterval) == .timedOut {
            job.cancellable.cancel()
            throw TokenStoreError(
                .timedOut,
                "The Secret Service did not answer within \(timeout) (\(GLibError.inWords(operation))); the call was cancelled.",
                hint: GLibError.notAnsweringHint)
        }
        // The worker stored the result before signalling `done`.
        switch job.result! {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }

    /// Type-erased base so the C thread entry point need not be generic.
    class AnyJob {
        func execute() {}
    }

    // @unchecked Sendable: `result` is written once by the worker before `done.signal()` and
    // read by the caller only after a successful `done.wait`; everything else is immutable.
    final class Job<T: Sendable>: AnyJob, @unchecked Sendable {
        let cancellable: GLibCancellable
        let body: @Sendable (GLibCancellable) throws(TokenStoreError) -> T
        let done = DispatchSemaphore(value: 0)
        var result: Result<T, TokenStoreError>?

        init(cancellable: GLibCancellable, body: @escaping @Sendable (GLibCancellable) throws(TokenStoreError) -> T) {
            self.cancellable = cancellable
            self.body = body
        }

        override func execute() {
            do {
                result = .success(try body(cancellable))
            } catch {
                result = .failure(error)
            }
            done.signal()
        }
    }
}

/// Owns one `GCancellable`.
// @unchecked Sendable: GCancellable is documented thread-safe (cancel from any thread); the
// pointer itself never changes and is released once in deinit.
final class GLibCancellable: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>

    init() {
        pointer = g_cancellable_new()
    }

    func cancel() { g_cancellable_cancel(pointer) }

    var isCancelled: Bool { g_cancellable_is_cancelled(pointer) != 0 }

    deinit { g_object_unref(pointer) }
}
