#if canImport(Glibc)
import Glibc
#endif

/// The package's one bounded executor for blocking work (as swift-nio's `NIOThreadPool`, or
/// the queue GRDB's async accessors run on): a fixed number of threads, a FIFO of jobs, and
/// ``run(droppingIfCancelled:_:)``, which suspends its caller instead of blocking it. The
/// async store calls (`TokenStore+Async.swift`) run their SQLite transactions, Secret Service
/// reads and key rotations here, so `async` code never holds a cooperative thread while it
/// waits on a lock, a disk or the keyring.
///
/// Threads start when work first queues and stay for the process (detached, idle on a
/// condition). Jobs start in the order they were asked for.
package final class BlockingExecutor: @unchecked Sendable {  // every `var` is guarded by `mutex`
    /// How many threads ``shared`` runs at most: enough for a session's store call beside a
    /// second account's and a maintenance pass, few enough that blocking work of one process
    /// cannot crowd out its own cooperative pool on a 2-core machine.
    package static let sharedThreadCount = 3

    /// The executor every async store call runs on.
    package static let shared = BlockingExecutor(threads: sharedThreadCount, name: "tokenstore-io")

    /// The most jobs that run at once.
    package let threadCount: Int
    private let name: String
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var queue: [Job] = []
    private var head = 0
    private var started = 0
    private var idle = 0
    private var signalled = 0  // idle threads already woken for a queued job

    /// An executor of at most `threads` threads (at least one), named `name` (15 bytes shown).
    package init(threads: Int, name: String) {
        threadCount = max(1, threads)
        self.name = name
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {  // only an executor that never started a thread ends: each thread holds a reference
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Runs `body` on one of the executor's threads and suspends the caller (no thread of the
    /// caller's is held) until it returns; what it throws reaches the caller with its type.
    ///
    /// A body that has started always runs to its end: a store write after a server's answer
    /// must not be lost to a cancelled task. A body that has not started yet is dropped when
    /// the calling task is cancelled, if `droppingIfCancelled` gives the error to throw then;
    /// without it (the default), the body runs whatever happens to the task.
    package func run<R: Sendable, E: Error>(
        droppingIfCancelled cancelledError: (@Sendable () -> E)? = nil,
        _ body: @escaping @Sendable () throws(E) -> R
    ) async throws(E) -> R {
        let job = TypedJob<R, E>(body: body, cancelledError: cancelledError)
        let result: Result<R, E> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<R, E>, Never>) in
                job.continuation = continuation
                enqueue(job)
            }
        } onCancel: {
            guard cancelledError != nil else { return }
            drop(job)
        }
        // What the executor's thread published (the same value), read under its lock.
        return try (job.published.withLock { $0 } ?? result).get()
    }

    // MARK: - Queue

    private func enqueue(_ job: Job) {
        pthread_mutex_lock(mutex)
        guard job.state == .new else {  // cancelled before it was queued
            pthread_mutex_unlock(mutex)
            job.resumeDropped()
            return
        }
        job.state = .queued
        queue.append(job)
        var spawn = false
        if idle > signalled {
            signalled += 1
            pthread_cond_signal(condition)
        } else if started < threadCount {
            started += 1
            spawn = true
        }
        pthread_mutex_unlock(mutex)
        if spawn && !startThread() {
            // No thread could be made: this caller's thread runs the queue instead of failing it.
            pthread_mutex_lock(mutex)
            started -= 1
            pthread_mutex_unlock(mutex)
            while let next = take(waiting: false) { next.execute() }
        }
    }

    /// Takes a queued job out of the queue, unless a thread has it: its caller gets its error now.
    private func drop(_ job: Job) {
        pthread_mutex_lock(mutex)
        let state = job.state
        if state == .new || state == .queued { job.state = .dropped }
        pthread_mutex_unlock(mutex)
        if state == .queued { job.resumeDropped() }  // `.new`: `enqueue` resumes it
    }

    /// The next job to run, waiting for one if `waiting`; `nil` when none is queued and not `waiting`.
    private func take(waiting: Bool) -> Job? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            while head < queue.count {
                let job = queue[head]
                head += 1
                if head > 64 && head * 2 > queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                if job.state == .queued {
                    job.state = .taken
                    return job
                }
            }
            guard waiting else { return nil }
            idle += 1
            pthread_cond_wait(condition, mutex)
            idle -= 1
            if signalled > 0 { signalled -= 1 }
        }
    }

    private func startThread() -> Bool {
        DetachedThread.start(name: name) { [self] in
            while let job = take(waiting: true) { job.execute() }
        }
    }

    // MARK: - Jobs

    /// Where a job is; changed only under the executor's `mutex`.
    enum JobState { case new, queued, taken, dropped }

    /// Type-erased job: the queue holds jobs of every result type.
    class Job: @unchecked Sendable {
        var state = JobState.new
        func execute() {}
        func resumeDropped() {}
    }

    // @unchecked Sendable: `continuation` is set before the job is queued and resumed exactly
    // once, by the thread that took the job or by whoever dropped it (state decides, under the lock).
    final class TypedJob<R: Sendable, E: Error>: Job, @unchecked Sendable {
        let body: @Sendable () throws(E) -> R
        let cancelledError: (@Sendable () -> E)?
        var continuation: CheckedContinuation<Result<R, E>, Never>?

        init(body: @escaping @Sendable () throws(E) -> R, cancelledError: (@Sendable () -> E)?) {
            self.body = body
            self.cancelledError = cancelledError
        }

        /// The body's result, published under a pthread mutex before the caller is resumed and
        /// read under it after: a happens-before edge ThreadSanitizer sees between the executor's
        /// thread (which made the value: a SecretBytes decoded there, say) and the caller's. The
        /// continuation's own resume was not seen as one (CI's TSan reported the handoff of a
        /// store read's SecretBytes to the cooperative thread that used it).
        let published = Locked<Result<R, E>?>(nil)

        override func execute() {
            let result: Result<R, E>
            do throws(E) { result = .success(try body()) } catch { result = .failure(error) }
            published.withLock { $0 = result }
            continuation?.resume(returning: result)
        }

        override func resumeDropped() {
            guard let cancelledError else { return }
            continuation?.resume(returning: .failure(cancelledError()))
        }
    }
}
