import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The file-system failures a user can act on, each named by its cause (the errno is kept as
/// the error's cause) with the way forward, instead of a bare `ioError`.
extension FileLayout {
    /// The error for a failed system call during `operation` ("creating the store directory"):
    /// EROFS, EACCES/EPERM, ENAMETOOLONG and ENOSPC are named; anything else is `ioError`.
    static func fileSystemError(_ operation: String, _ code: Int32) -> TokenStoreError {
        switch code {
        case EROFS: return readOnlyFileSystem(operation)
        case EACCES, EPERM:
            return TokenStoreError(
                .unsafeFileLayout, "Permission denied (\(errnoName(code))) while \(operation).",
                hint: "Give the store back to this user: directory 0700, database 0600.", cause: .posix(errno: code, operation: operation))
        case ENAMETOOLONG:
            return TokenStoreError(
                .invalidInput,
                "The store path is too long (ENAMETOOLONG): the system allows \(Self.maximumPathBytes) bytes in all and "
                    + "\(Self.maximumNameBytes) per name.",
                hint: "Give a shorter store path.", cause: .posix(errno: code, operation: operation))
        case ENOSPC, EDQUOT:
            return TokenStoreError(
                .diskFull, "The disk is full (\(errnoName(code))) while \(operation); nothing was half written.",
                hint: "Free some disk space and try again.", cause: .posix(errno: code, operation: operation))
        default:
            return TokenStoreError(.ioError, "A file-system call failed while \(operation).", cause: .posix(errno: code, operation: operation))
        }
    }

    /// The store's file system is mounted read-only (EROFS): it can be read, not written.
    static func readOnlyFileSystem(_ operation: String) -> TokenStoreError {
        TokenStoreError(
            .ioError,
            "The store is on a read-only file system (EROFS) while \(operation): it can be read but not written; nothing was changed.",
            hint: "The commands that only read still work. To write, remount the file system read-write or move the store.",
            cause: .posix(errno: EROFS, operation: operation))
    }

    /// The longest path (bytes, the final NUL excluded) and the longest name the system takes.
    package static let maximumPathBytes = Int(PATH_MAX) - 1
    package static let maximumNameBytes = Int(NAME_MAX)

    /// Refuses, before anything is made, a store path the system cannot name (ENAMETOOLONG).
    /// - Throws: `invalidInput`.
    package static func checkPathLength(_ path: String) throws {
        let tooLong = path.utf8.count > maximumPathBytes
            || path.split(separator: "/").contains { $0.utf8.count > maximumNameBytes }
        if tooLong { throw fileSystemError("checking the store path", ENAMETOOLONG) }
    }

    /// Refuses a writing open in an existing store directory that cannot be written: a read-only
    /// file system (EROFS), or a directory this user may not write (EACCES: e.g. 0500). SQLite
    /// would fail later with "unable to open database file". Nothing is changed.
    static func refuseUnwritableDirectory(_ directory: String) throws {
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return }
        guard faccessat(AT_FDCWD, directory, W_OK, AT_EACCESS) != 0 else { return }
        let code = errno
        if code == EROFS { throw readOnlyFileSystem("opening the store for writing") }
        if code == EACCES {
            throw permissionDenied(
                "the store directory cannot be written (mode \(modeText(info.st_mode))), and a writing command "
                    + "makes its side files there; nothing was changed")
        }
    }

    /// `0500`: a mode's permission bits as `chmod` takes them.
    static func modeText(_ mode: mode_t) -> String {
        let digits = String(Int(mode & 0o777), radix: 8)
        return "0" + String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    /// The errno's symbolic name for the few named above, else its number.
    static func errnoName(_ code: Int32) -> String {
        switch code {
        case EROFS: return "EROFS"
        case EACCES: return "EACCES"
        case EPERM: return "EPERM"
        case ENAMETOOLONG: return "ENAMETOOLONG"
        case ENOSPC: return "ENOSPC"
        case EDQUOT: return "EDQUOT"
        default: return "errno \(code)"
        }
    }
}
