import FoundationEssentials
import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// A lock shared by every process using one store, held while a refresh token is presented
/// to the server and its successor stored, so a rotating refresh token is never presented
/// twice. It is `flock` on a file beside the database (``FileLayout/renewalLockPath(of:)``, mode 0600,
/// never followed if it is a symlink); the kernel releases it if the holder dies.
struct RenewalLock: Sendable {
    let path: String
    /// How long to wait for another process's renewal before giving up with `timedOut`.
    var timeout: Duration = .seconds(60)

    init(storePath: String) {
        path = FileLayout.renewalLockPath(of: storePath)
    }

    /// Runs `body` holding the lock. Waiting polls without blocking a thread, and is cancellable.
    func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let held = try await acquire()
        defer { held.release() }
        return try await body()
    }

    /// Takes the lock (waiting as ``withLock(_:)`` does) and hands it over: it is held until
    /// ``Held/release()``, by whichever task calls it.
    /// - Throws: `timedOut`, `cancelled`, `storage` (the file cannot be opened or locked).
    func acquire() async throws -> Held {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw AuthSessionError.storage(TokenStoreError(
                .ioError, "The renewal lock file could not be opened.", cause: .posix(errno: errno, operation: "open renewal lock")))
        }
        let held = Held(fd: fd)  // closes the file however this ends
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var pause = Duration.milliseconds(2)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw AuthSessionError.storage(TokenStoreError(
                    .ioError, "The renewal lock could not be taken.", cause: .posix(errno: errno, operation: "flock")))
            }
            guard clock.now < deadline else {
                throw AuthSessionError(.timedOut, "Another process held the renewal lock for longer than \(timeout).")
            }
            do { try await Task.sleep(for: pause) } catch { throw AuthSessionError(.cancelled, "Waiting for the renewal lock was cancelled.") }
            pause = min(pause * 2, .milliseconds(50))
        }
        return held
    }

    /// The lock file, open (and locked once ``acquire()`` returned it); released and closed once.
    final class Held: Sendable {
        private let fd: Locked<Int32?>

        init(fd: Int32) { self.fd = Locked(fd) }

        /// Unlocks and closes the file (the kernel would on close anyway); later calls do nothing.
        func release() {
            guard let fd = fd.withLock({ fd in defer { fd = nil }; return fd }) else { return }
            flock(fd, LOCK_UN)
            close(fd)
        }

        deinit { release() }
    }
}
