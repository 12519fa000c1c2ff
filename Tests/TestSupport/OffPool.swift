import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs `work` off Swift's cooperative pool, on threads of the test suite's own: synchronous
/// parts (a `ChildProcess` waited for, a blocking store call, a sleep, a crash loop) hold one of
/// those threads, never a cooperative one.
///
/// Swift Testing runs synchronous and `async` tests alike on the cooperative pool, as many
/// threads as cores: on 2 cores two long blocking tests held it for minutes, and the sign-in
/// tests' listener tasks and timers (and `BlockingExecutorTests`' probe) could not run, so they
/// timed out under ASan. `work` runs with `OffPoolExecutor.shared` as its task executor
/// preference: it starts on one of its threads, comes back to one after every `await`, and
/// its structured child tasks (`async let`, task groups) run there too. Unstructured `Task {}`
/// inside the library still goes to the cooperative pool, which stays free for it.
///
/// Suites use it through the `.offPool` trait (Tests/TestTraits), which runs each test this way.
public func offPool<T, E: Error>(_ work: () async throws(E) -> T) async throws(E) -> T {
    try await withTaskExecutorPreference(OffPoolExecutor.shared, operation: work)
}

/// The task executor behind `offPool`: every job runs on a new thread of its own (a plain
/// pthread, its creation checked), so a job never waits for another job to stop blocking (no
/// deadlock, however many tests block at once; how many run at once is the `.offPool` trait's
/// business). A thread per job costs tens of microseconds; a test's jobs are its stretches
/// between two `await`s.
public final class OffPoolExecutor: TaskExecutor, @unchecked Sendable {  // stateless
    public static let shared = OffPoolExecutor()

    /// Whether the calling thread is one of the executor's (a test checks `.offPool` with it).
    public static var isCurrentThread: Bool { Thread.current.threadDictionary[marker] != nil }

    private static let marker = "TokenStoreTests.OffPoolExecutor"

    private final class Start {
        let job: UnownedJob
        let executor: OffPoolExecutor
        init(job: UnownedJob, executor: OffPoolExecutor) { (self.job, self.executor) = (job, executor) }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let start = Unmanaged.passRetained(Start(job: UnownedJob(job), executor: self)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, 8 << 20)  // the default pthread stack; sanitizers need the room
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { raw in
            let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
            Thread.current.threadDictionary[OffPoolExecutor.marker] = true
            start.job.runSynchronously(on: start.executor.asUnownedTaskExecutor())
            return nil
        }, start)
        // A job that cannot run would leave its test suspended for ever: fail loudly instead.
        precondition(status == 0, "offPool: pthread_create failed (\(status))")
    }
}

/// At most `width` holders at once; the others wait suspended (holding no thread), first come
/// first served. The `.offPool` trait bounds the suites under way and the tests running with two.
public actor OffPoolWidth {
    /// The top-level suites (and free tests) under way at once: `TOKENSTORE_SUITE_WIDTH`, else
    /// one more than the test width, so a suite whose tests are serialized never idles the rest.
    public static let suites = OffPoolWidth(
        width: Int(ProcessInfo.processInfo.environment["TOKENSTORE_SUITE_WIDTH"] ?? "") ?? testWidth + 1)
    /// The tests running at once: `TOKENSTORE_TEST_WIDTH`, else two per core (at least 4):
    /// twice what the cooperative pool let the synchronous tests run at once, since most of a
    /// blocking test's time is spent waiting on a child process, the keyring or a server.
    public static let tests = OffPoolWidth(width: testWidth)

    private static let testWidth =
        Int(ProcessInfo.processInfo.environment["TOKENSTORE_TEST_WIDTH"] ?? "")
        ?? max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)

    public let width: Int
    private var held = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(width: Int) { self.width = max(1, width) }

    /// Runs `body` holding a place, given back however `body` ends.
    public nonisolated func holding(_ body: () async throws -> Void) async throws {
        await acquire()
        do {
            try await body()
        } catch {
            await release()
            throw error
        }
        await release()
    }

    public func acquire() async {
        if held < width {
            held += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }  // `release` hands its place over
    }

    public func release() {
        if waiting.isEmpty {
            held -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
