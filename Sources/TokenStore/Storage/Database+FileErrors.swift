internal import CSQLite
#if canImport(Glibc)
import Glibc
#endif

extension Database {
    /// An SQLite failure to open or write a file whose system error the user can act on — a
    /// read-only file system (EROFS: a writing command on a read-only mount), a directory or
    /// file this user may not write (EACCES, EPERM: e.g. a 0500 folder where SQLite makes its
    /// -wal), a path too long — named as ``FileLayout/fileSystemError(_:_:)`` names it, with
    /// SQLite's result kept as the cause; nil for anything else. `systemErrno` is
    /// `sqlite3_system_errno`, read only for the file results it explains.
    static func fileSystemError(code: Int32, systemErrno: Int32, context: String) -> TokenStoreError? {
        switch code & 0xff {
        case SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_IOERR, SQLITE_PERM:
            break
        default:
            return nil
        }
        guard [EROFS, EACCES, EPERM, ENAMETOOLONG].contains(systemErrno) else { return nil }
        return FileLayout.fileSystemError(context, systemErrno)
    }
}
