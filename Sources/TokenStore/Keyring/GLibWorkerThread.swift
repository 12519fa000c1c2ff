internal import CGIO

/// Runs one blocking GLib/libsecret call on a thread of its own, bounded by a time limit.
///
/// libsecret's `_sync` calls block until the Secret Service answers and have no timeout of
/// their own. Each call gets a fresh thread (never the caller's, ``DeadlineThread``) and a
/// `GCancellable`; when the time limit passes, the cancellable is cancelled and the caller gets
/// `timedOut` at once. The worker finishes on its own: it owns every GLib object it creates and
/// frees them, and a late result is dropped (a late ``SecretBytes`` wipes itself).
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
        let cancellable = GLibCancellable()
        let outcome = DeadlineThread.run(name: "tokenstore-secret", timeout: timeout) { () -> Result<T, TokenStoreError> in
            do throws(TokenStoreError) { return .success(try body(cancellable)) } catch { return .failure(error) }
        }
        switch outcome {
        case .finished(let result): return try result.get()
        case .timedOut:
            cancellable.cancel()
            throw TokenStoreError(
                .timedOut,
                "The Secret Service did not answer within \(timeout) (\(GLibError.inWords(operation))); the call was cancelled.",
                hint: GLibError.notAnsweringHint)
        case .noThread(let errno):
            throw TokenStoreError(
                .ioError, "Could not start a thread for the Secret Service call (\(GLibError.inWords(operation))).",
                cause: .posix(errno: errno, operation: "pthread_create"))
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
