import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

extension FileLayout {
    /// What is at a store path, as judged before anything is created or changed.
    package enum FileState: Equatable, Sendable {
        /// No file (or no directory) at the path.
        case missing
        /// A zero-length file: a writing open may make it a store.
        case empty
        /// A file with content: a store, or a file that must be left alone.
        case nonEmpty
    }

    /// Judges the store at `path` the way every open does, changing nothing: the directory must
    /// be a directory of this user that others cannot write to, the database and its side files
    /// regular files of this user with one link each, and the database readable. Modes looser
    /// than 0700/0600 are not refused here (a writing open tightens them, ``prepare(databasePath:)``).
    /// - Throws: `unsafeFileLayout` (a hostile layout, or "permission denied" for a directory
    ///   that cannot be entered or a file that cannot be read), `ioError`.
    package static func judge(databasePath path: String) throws -> FileState {
        let directory = PathNames.directory(of: path).isEmpty ? "." : PathNames.directory(of: path)
        var info = stat()
        if lstat(directory, &info) != 0 {
            if errno == ENOENT { return .missing }
            if errno == EACCES { throw permissionDenied("a folder above the store directory cannot be searched") }
            throw posixError("inspecting the store directory", errno)
        }
        try checkDirectory(info, what: "store")
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .missing }
            if errno == EACCES { throw permissionDenied("the store directory cannot be entered (make it 0700)") }
            throw posixError("inspecting a store file", errno)
        }
        try checkFile(info, name: "database")
        let size = info.st_size
        if access(path, R_OK) != 0 {
            if errno == EACCES { throw permissionDenied("the database file cannot be read (make it 0600)") }
            throw posixError("checking access to the database file", errno)
        }
        for suffix in sqliteSuffixes where lstat(path + suffix, &info) == 0 {
            try checkFile(info, name: "database side file")
        }
        return size == 0 ? .empty : .nonEmpty
    }

    /// The directory checks shared by ``judge(databasePath:)`` and ``prepareDirectory(_:what:)``.
    static func checkDirectory(_ info: stat, what: String) throws {
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw unsafe("The \(what) directory is not a directory (a symbolic link or a file).")
        }
        guard info.st_uid == geteuid() else {
            throw unsafe("The \(what) directory is owned by another user.")
        }
        guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw unsafe("The \(what) directory is writable by other users; make it 0700.")
        }
    }

    /// The checks of one existing store file (`name`: "database", "database side file").
    static func checkFile(_ info: stat, name: String) throws {
        if (info.st_mode & S_IFMT) == S_IFLNK {
            throw unsafe("The \(name) path is a symbolic link; refusing to open it.")
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            // A mistyped path, not a permission problem: no hint about private directories.
            throw TokenStoreError(.unsafeFileLayout, "The \(name) path names a directory, not a file.")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw unsafe("The \(name) path is not a regular file.") }
        guard info.st_uid == geteuid() else { throw unsafe("The \(name) is owned by another user.") }
        guard info.st_nlink == 1 else {
            throw unsafe("The \(name) has \(info.st_nlink) hard links; refusing to open a linked file.")
        }
    }

    /// An EACCES the user can fix by a mode change: `unsafeFileLayout`, saying "permission denied".
    static func permissionDenied(_ what: String) -> TokenStoreError {
        TokenStoreError(
            .unsafeFileLayout, "Permission denied: \(what).",
            hint: "Give the store back to this user: directory 0700, database 0600.",
            cause: .posix(errno: EACCES, operation: "access"))
    }
}
