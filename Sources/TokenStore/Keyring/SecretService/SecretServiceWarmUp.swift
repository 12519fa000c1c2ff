internal import CGIO
internal import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// Connects to the Secret Service and opens its transfer session on a thread of its own while
/// a store reads its database file (``TokenStore``'s open starts it first thing, through
/// ``KeyProvider/beginConnecting()``, in its
/// open), so the open waits for the slower of the two instead of both in turn.
///
/// The connection (`Hello`, the service's `GetAll`) and the session (`OpenSession`: a
/// Diffie-Hellman exchange, computed on both sides) are about two thirds of a key read's time;
/// the database's own work (schema check, migrations, key reference) needs neither. The warm-up
/// runs in two steps: libsecret's cached service proxy (`secret_service_get_sync`), then its
/// session (`secret_service_ensure_session_sync`). Every later call gets that same proxy
/// (``SecretServiceItems/withService(_:operation:needsSession:_:)``): a search, which needs no
/// session, waits only for the first step and so runs while the exchange is computed; a call
/// that moves a secret waits for both. A call waits rather than connecting beside the warm-up:
/// libsecret caches the first proxy that finishes, and a second would open its own session.
///
/// Best effort: a warm-up that fails (no service, no bus) leaves nothing behind, and the call
/// after it meets and reports the same failure. State of the path-level backend
/// (``SecretServicePathBackend/warmUp``): in a sandbox libsecret may pick its file backend, and
/// the other backend has no warm-up.
///
/// Its own thread (``DetachedThread``), not ``BlockingExecutor``: the store calls running there
/// wait for the warm-up, so queued behind them it could only make them wait out its time limit.
final class SecretServiceWarmUp: Sendable {
    private let gate = Gate()

    /// Starts a warm-up unless one runs. Returns at once.
    /// - Parameter timeout: how long calls wait for it at most (the provider's operation bound).
    func begin(timeout: Duration) {
        guard !SecretServiceItems.registeredTypes.contains(0) else { return }
        guard gate.enter(forMilliseconds: timeout.wholeMilliseconds) else { return }
        let gate = gate
        let started = DetachedThread.start(name: "tokenstore-warmup") {
            var error: UnsafeMutablePointer<GError>?
            let service = secret_service_get_sync(SECRET_SERVICE_NONE, nil, &error)
            gate.connected()
            if let service {
                _ = secret_service_ensure_session_sync(service, nil, &error)
                g_object_unref(service)  // libsecret's cache keeps its own reference
            }
            if let error { g_error_free(error) }  // the next call meets the same failure and reports it
            gate.leave()
        }
        if !started { gate.leave() }
    }

    /// Waits while a warm-up runs: until it ends (`needsSession`) or has its connection (not
    /// `needsSession`), `cancellable` is cancelled (the caller's own time limit), or the warm-up's
    /// time is up. Returns at once when none runs.
    func waitWhileRunning(_ cancellable: GLibCancellable, needsSession: Bool = true) {
        gate.wait(forSession: needsSession, until: { cancellable.isCancelled })
    }

    /// Whether a warm-up runs and has its connection yet, with its deadline, behind a pthread
    /// mutex and condition.
    private final class Gate: @unchecked Sendable {  // `running`, `connecting`, `deadline`: guarded by `mutex`
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        private var running = false
        private var connecting = false
        private var deadline = timespec()

        init() {
            pthread_mutex_init(mutex, nil)
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(condition, &attributes)
            pthread_condattr_destroy(&attributes)
        }

        /// Marks a warm-up running for at most `milliseconds`; false when one runs already.
        func enter(forMilliseconds milliseconds: Int64) -> Bool {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            if running && !Self.passed(deadline) { return false }
            running = true
            connecting = true
            deadline = Self.now(plusMilliseconds: milliseconds)
            return true
        }

        /// The first step is over: libsecret has cached its service proxy (or failed to).
        func connected() {
            pthread_mutex_lock(mutex)
            connecting = false
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }

        func leave() {
            pthread_mutex_lock(mutex)
            running = false
            connecting = false
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }

        /// Waits in slices of 20 ms (checking `stop` between them) while a warm-up runs
        /// (`forSession`) or is still connecting.
        func wait(forSession: Bool, until stop: () -> Bool) {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while (forSession ? running : connecting) && !Self.passed(deadline) && !stop() {
                var slice = Self.now(plusMilliseconds: 20)
                if Self.isBefore(deadline, slice) { slice = deadline }
                pthread_cond_timedwait(condition, mutex, &slice)
            }
        }

        private static func now(plusMilliseconds milliseconds: Int64) -> timespec {
            var time = timespec()
            clock_gettime(CLOCK_MONOTONIC, &time)
            let nanoseconds = Int64(time.tv_nsec) + (milliseconds % 1_000) * 1_000_000
            time.tv_sec += Int(milliseconds / 1_000 + nanoseconds / 1_000_000_000)
            time.tv_nsec = Int(nanoseconds % 1_000_000_000)
            return time
        }

        private static func passed(_ deadline: timespec) -> Bool { isBefore(deadline, now(plusMilliseconds: 0)) }

        private static func isBefore(_ a: timespec, _ b: timespec) -> Bool {
            a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec)
        }
    }
}
