import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The advisory lock that lets one change of a store's data keys run at a time — a rotation, or
/// the making of a new store's first key (``KeySetup``): `flock` on the store's
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

    /// The lock, waiting for as long as another store object or process holds it (the holder's
    /// key provider calls are bounded by that provider's time-outs; a holder that dies releases it).
    static func acquireWaiting(storePath: String) throws -> RotationLock {
        guard let fd = try FileLayout.openLockFile(FileLayout.rotationLockPath(of: storePath), what: "key lock", wait: true) else {
            throw TokenStoreError(.ioError, "Could not take the key lock.")  // a waiting flock never reports it busy
        }
        return RotationLock(fd: fd)
    }
}
