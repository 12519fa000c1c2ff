#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, with `Synchronization.Mutex`'s `withLock` shape.
///
/// Used instead of `Mutex` throughout the package: the same exclusion, but ThreadSanitizer
/// understands pthread mutexes, while `Mutex`'s raw futex calls are invisible to it, so a value
/// handed between threads through a `Mutex` reads as a data race (905 false reports in one run,
/// from GuardedMemory's slot pool) and a real race next to one goes unseen.
///
/// The value lives in memory of its own, reached through a pointer, rather than in a stored
/// `var`: Swift's exclusivity checks on a class's `var` are what ThreadSanitizer reports as
/// "Swift access race" (it records them at the object, outside the mutex: two reports in one CI
/// run, from the redirect listener's and the curl transfer's locks). Both stored properties are
/// `let`, so nothing of the object itself is checked.
// @unchecked Sendable: every access to the value holds `mutex`.
package final class Locked<Value>: @unchecked Sendable {
    private let value: UnsafeMutablePointer<Value>
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ initial: Value) {
        value = .allocate(capacity: 1)
        value.initialize(to: initial)
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
