#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, with `Synchronization.Mutex`'s `withLock` shape.
///
/// Used instead of `Mutex` throughout the package: the same exclusion, but ThreadSanitizer
/// understands pthread mutexes, while `Mutex`'s raw futex calls are invisible to it, so a value
/// handed between threads through a `Mutex` reads as a data race (905 false reports in one run,
/// from GuardedMemory's slot pool) and a real race next to one goes unseen.
// @unchecked Sendable: every access to `value` holds `mutex`.
package final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
