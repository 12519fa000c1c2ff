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

    /// Maps an SQLite result code to a typed error; the SQLite message (which never holds
    /// bound values) is kept as the cause.
    static func error(code: Int32, message: String, context: String, systemErrno: Int32 = 0) -> TokenStoreError {
        if let named = fileSystemError(code: code, systemErrno: systemErrno, context: context) { return named }
        let cause = TokenStoreError.Cause.sqlite(extendedCode: code, message: message)
        switch code & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return TokenStoreError(.databaseBusy, "The database stayed locked by another connection while \(context).", cause: cause)
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT:
            return TokenStoreError(.databaseCorrupt, "The database file is corrupt or not a TokenStore database (\(context)).", cause: cause)
        case SQLITE_ERROR where message.hasPrefix("unsupported file format"):
            // A damaged header (schema format number SQLite does not know) comes back as a
            // plain SQLITE_ERROR with this message, not as SQLITE_CORRUPT or SQLITE_FORMAT.
            return TokenStoreError(.databaseCorrupt, "The database file is corrupt or not a TokenStore database (\(context)).", cause: cause)
        case SQLITE_FULL:
            return TokenStoreError(
                .diskFull, "The disk is full (\(context)); the write was rolled back.", hint: "Free some disk space and try again.",
                cause: cause)
        case SQLITE_CANTOPEN where code == SQLITE_CANTOPEN | (6 << 8):  // SQLITE_CANTOPEN_SYMLINK
            return TokenStoreError(.unsafeFileLayout, "The database path is a symbolic link; refusing to open it.", cause: cause)
        default:
            return TokenStoreError(.ioError, "SQLite failed while \(context).", cause: cause)
        }
    }
}
