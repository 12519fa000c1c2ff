internal import CGlibcExtensions
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The package's one way to start a thread: a detached POSIX thread, named, running one closure.
/// (Foundation's `Thread` is not in FoundationEssentials.) Its users:
///
/// - ``BlockingExecutor``'s own threads;
/// - work that may wait on another party for as long as it takes, which on the bounded executor
///   would hold its threads from the store's work: the session layer's transfers (up to their
///   time limit), the loopback listener (a redirect the user gives after minutes), the browser
///   opener and reaper (a browser's exit), and the Secret Service's warm-up;
/// - ``DeadlineThread``: a call with no time-out of its own (a libsecret call, a TPM session),
///   abandoned with its thread when it does not answer in time.
package enum DetachedThread {
    /// Starts `body` on a new detached thread named `name` (the first 15 bytes).
    /// - Returns: false when no thread could be made (`body` then never runs).
    @discardableResult
    package static func start(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
        starting(name: name, stackSize: stackSize, body) == 0
    }

    /// As ``start(name:stackSize:_:)``, for a caller that reports why no thread could be made.
    /// - Returns: 0 when the thread started, else `pthread_create`'s error number (`EAGAIN`: the
    ///   process or the system is out of threads; `body` then never runs).
    static func starting(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Int32 {
        let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            _ = tokenstore_set_thread_name(box.name)
            box.body()
            return nil
        }, box)
        if status != 0 { Unmanaged<Box>.fromOpaque(box).release() }
        return status
    }

    private final class Box {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
