import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The mutex that serializes a store object's calls. It is error-checking: a call into the
/// store from inside one of its own callbacks (the body of `forEachItem`, the progress of
/// `verify` or a rotation, a log handler), on the thread that holds the lock, is a typed
/// error instead of a deadlock.
final class StoreLock: @unchecked Sendable {  // the pthread mutex is the synchronization
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    /// - Throws: `invalidInput` when this thread already holds it (a call from inside a callback).
    func withLock<T>(_ body: () throws -> T) throws -> T {
        let status = pthread_mutex_lock(mutex)
        guard status == 0 else {
            if status == EDEADLK {
                throw TokenStoreError(
                    .invalidInput,
                    "The store was called from inside one of its own callbacks (forEachItem, a progress handler or a log handler).",
                    hint: "Collect what you need in the callback and act on the store after the call returns.")
            }
            throw TokenStoreError(.ioError, "The store's lock failed (error \(status)).")
        }
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
