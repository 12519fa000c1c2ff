internal import CGlibcExtensions
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// A detached POSIX thread running one closure: the blocking work of the transport, the
/// loopback listener and the browser opener stays off the cooperative pool. (Foundation's
/// `Thread` is not in FoundationEssentials.)
///
/// Not the package's `BlockingExecutor`: its jobs wait on other parties for as long as they take
/// (a redirect the user gives after minutes, a browser's exit, a transfer up to its time limit),
/// and on a bounded executor they would hold its threads from the store's work.
enum DetachedThread {
    /// Starts `body` on a new detached thread named `name` (the first 15 bytes).
    /// - Returns: false when no thread could be made (`body` then never runs).
    @discardableResult
    static func start(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
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
        guard status == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            return false
        }
        return true
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
