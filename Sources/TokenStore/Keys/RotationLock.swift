import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The advisory lock that lets one rotation run at a time: `flock` on the store's
/// ``FileLayout/rotationLockPath(of:)``, released by closing (also when the process dies).
final class RotationLock {
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }
    deinit { Glibc.close(fd) }

    /// The lock, or nil when another store object or process holds it.
    static func acquire(storePath: String) throws -> RotationLock? {
        guard let fd = try FileLayout.openLockFile(FileLayout.rotationLockPath(of: storePath), what: "rotation lock") else {
            return nil
        }
        return RotationLock(fd: fd)
    }
}
