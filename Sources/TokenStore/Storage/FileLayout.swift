import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Makes and checks the store's directory and files: directory 0700, database 0600 (its
/// -wal and -shm inherit the mode from it), whatever the umask. Hostile layouts — a
/// symlink or hard link at the database path, a directory others can write to, files owned
/// by another user — are refused with `unsafeFileLayout`.
///
/// It is also the one owner of the names of a store's files: SQLite's side files and the
/// lock files beside the database. ``destroyStore(confirm:)`` removes ``allFiles(of:)``.
package enum FileLayout {
    /// SQLite's side files of a database in WAL mode (and of one left in rollback mode).
    static let sqliteSuffixes = ["-wal", "-shm", "-journal"]

    /// The lock that lets one change of the data keys run at a time (a rotation, a new store's first key).
    static func rotationLockPath(of databasePath: String) -> String { databasePath + "-keyrotation.lock" }

    /// The lock held while a refresh token is presented and its successor stored (session layer).
    package static func renewalLockPath(of databasePath: String) -> String { databasePath + ".renewal-lock" }

    /// Where versions before schema 13 kept the session layer's copy of an issuer's discovery
    /// document, unsealed (with a temporary file it was written through). Never read: the
    /// document is sealed in the store now (``DiscoveryRecord``); a writing store removes the
    /// file when it keeps a document, and ``destroyStore(confirm:)`` removes it.
    package static func legacyDiscoveryPath(of databasePath: String) -> String { databasePath + ".discovery.json" }

    /// Every file of the store at `databasePath`, the database last.
    static func allFiles(of databasePath: String) -> [String] {
        sqliteSuffixes.map { databasePath + $0 }
            + [rotationLockPath(of: databasePath), renewalLockPath(of: databasePath),
               legacyDiscoveryPath(of: databasePath), legacyDiscoveryPath(of: databasePath) + ".tmp", databasePath]
    }

    /// What ``prepare(databasePath:)`` made, so that a failed open can remove it again.
    struct Created {
        /// Whether the database file was made by this call.
        var file = false
        /// The directories made by this call, outermost first.
        var directories: [String] = []
    }

    /// Prepares `path` for opening: creates the directory and an empty 0600 file if needed.
    /// A database (or side file) its owner made read-only is refused before anything is changed:
    /// modes are only ever tightened, never loosened.
    /// - Returns: what it created.
    @discardableResult
    static func prepare(databasePath path: String) throws -> Created {
        let directory = PathNames.directory(of: path)
        for file in [path] + sqliteSuffixes.map({ path + $0 }) { try refuseReadOnly(file) }
        try refuseUnwritableDirectory(directory.isEmpty ? "." : directory)
        var created = Created()
        created.directories = try prepareDirectory(directory.isEmpty ? "." : directory)
        created.file = try prepareFile(path)
        for suffix in sqliteSuffixes {
            try checkExistingFile(path + suffix)
        }
        return created
    }

    /// Removes what a failed open created (``prepare(databasePath:)``): the database file, its
    /// side files and the key lock its first key was to be made under, then the directories made
    /// for it while they are empty.
    static func removeCreated(_ created: Created, databasePath path: String) {
        guard created.file else { return }
        for file in sqliteSuffixes.map({ path + $0 }) + [rotationLockPath(of: path), path] { unlink(file) }
        for directory in created.directories.reversed() { rmdir(directory) }
    }

    /// Whether an existing store at `path` has a layout ``prepare(databasePath:)`` would accept,
    /// found without creating or changing anything: the directory ours and not writable by
    /// others, the database and its side files (when present) regular files of ours with one link.
    static func looksSafe(databasePath path: String) -> Bool {
        let directory = PathNames.directory(of: path)
        var info = stat()
        guard lstat(directory.isEmpty ? "." : directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR,
            info.st_uid == geteuid(), info.st_mode & (S_IWGRP | S_IWOTH) == 0
        else { return false }
        guard lstat(path, &info) == 0, info.st_size > 0 else { return false }
        for file in [path] + sqliteSuffixes.map({ path + $0 }) {
            guard lstat(file, &info) == 0 else {
                if errno == ENOENT, file != path { continue }
                return false
            }
            guard (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1 else { return false }
        }
        return true
    }

    /// Opens (creating, 0600, never through a symlink) the lock file at `path` and takes an
    /// exclusive `flock` without waiting. Returns the descriptor holding the lock (close it to
    /// release), or nil when someone else holds it.
    /// - Throws: `unsafeFileLayout` (a symlink, not a regular file of this user), `ioError`.
    package static func openLockFile(_ path: String, what: String, wait: Bool = false) throws -> Int32? {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == ELOOP {
                throw TokenStoreError(.unsafeFileLayout, "The \(what) file is a symbolic link; refusing to open it.")
            }
            throw TokenStoreError(.ioError, "Could not open the \(what) file.", cause: .posix(errno: errno, operation: "open"))
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
            close(fd)
            throw TokenStoreError(.unsafeFileLayout, "The \(what) file is not a regular file of this user.")
        }
        if info.st_mode & 0o777 != 0o600 { _ = fchmod(fd, 0o600) }
        if flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            let error = errno
            close(fd)
            if error == EWOULDBLOCK { return nil }
            throw TokenStoreError(.ioError, "Could not take the \(what).", cause: .posix(errno: error, operation: "flock"))
        }
        return fd
    }

    /// The file a ``PassphraseKeyProvider`` keeps key `keyID` of store `storeID` in.
    static func wrappedKeyPath(directory: String, storeID: String, keyID: String) -> String {
        "\(directory)/tokenstore-\(storeID)-\(keyID).key"
    }

    /// fsyncs the directory holding `path`, so deletions and renames are durable.
    package static func syncDirectory(of path: String) { POSIXFile.syncDirectory(of: path) }

    /// Makes `directory` (and missing parents) with mode 0700, or checks an existing one: a
    /// directory (not a link), of this user, not writable by others; one others can read or
    /// enter (e.g. 0755) is tightened to 0700.
    /// - Returns: the directories it made, outermost first.
    /// - Throws: `unsafeFileLayout` naming `what` ("store", "key"), `ioError`.
    @discardableResult
    static func prepareDirectory(_ directory: String, what: String = "store") throws -> [String] {
        var info = stat()
        var made: [String] = []
        if lstat(directory, &info) != 0 {
            if errno == EACCES { throw permissionDenied("a folder above the \(what) directory cannot be searched") }
            guard errno == ENOENT else { throw posixError("inspecting the \(what) directory", errno) }
            try createDirectories(directory, made: &made)
            guard lstat(directory, &info) == 0 else { throw posixError("inspecting the \(what) directory", errno) }
        }
        try checkDirectory(info, what: what)
        if info.st_mode & 0o077 != 0 { try tighten(directory, what: what) }
        return made
    }

    /// Makes an existing directory of this user 0700 (one that others could list or enter),
    /// through a descriptor opened without following links and checked again.
    private static func tighten(_ directory: String, what: String) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw posixError("opening the \(what) directory to tighten its mode", errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw posixError("inspecting the \(what) directory", errno) }
        guard info.st_uid == geteuid() else { throw unsafe("The \(what) directory is owned by another user.") }
        guard fchmod(fd, 0o700) == 0 else { throw posixError("setting the \(what) directory mode to 0700", errno) }
    }

    /// Creates missing directories with mode 0700 (chmod after mkdir, so the umask does not matter).
    private static func createDirectories(_ directory: String, made: inout [String]) throws {
        let parent = PathNames.directory(of: directory)
        if !parent.isEmpty, parent != directory {
            var info = stat()
            if lstat(parent, &info) != 0 {
                if errno == EACCES { throw permissionDenied("a folder above the store directory cannot be searched") }
                guard errno == ENOENT else { throw posixError("inspecting a parent directory", errno) }
                try createDirectories(parent, made: &made)
            }
        }
        if mkdir(directory, 0o700) != 0 {
            if errno == EACCES { throw permissionDenied("the store directory cannot be created in its parent folder") }
            guard errno == EEXIST else { throw posixError("creating the store directory", errno) }
            return
        }
        made.append(directory)
        guard chmod(directory, 0o700) == 0 else { throw posixError("setting the store directory mode", errno) }
    }

    /// Creates the database file (true) or checks the existing one (false).
    private static func prepareFile(_ path: String) throws -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 {
            defer { close(fd) }
            guard fchmod(fd, 0o600) == 0 else { throw posixError("setting the database mode", errno) }
            return true
        }
        guard errno == EEXIST else {
            if errno == ELOOP { throw unsafe("The database path is a symbolic link; refusing to open it.") }
            if errno == EACCES { throw permissionDenied("the database file cannot be created in the store directory") }
            throw posixError("creating the database file", errno)
        }
        try checkExistingFile(path)
        return false
    }

    /// An existing file must be a regular file, not linked elsewhere, owned by us; its mode is
    /// tightened to 0600 (only tightened: one its owner cannot write is refused, ``refuseReadOnly(_:)``).
    private static func checkExistingFile(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw posixError("inspecting a store file", errno)
        }
        let name = sqliteSuffixes.contains(where: { path.hasSuffix($0) }) ? "database side file" : "database"
        try checkFile(info, name: name)
        try refuseReadOnly(info, name: name == "database" ? "database file" : name)
        if info.st_mode & 0o777 != 0o600 {
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0, errno == EACCES { throw permissionDenied("the \(name) cannot be read (make it 0600)") }
            guard fd >= 0 else { throw posixError("opening a store file to fix its mode", errno) }
            defer { close(fd) }
            guard fchmod(fd, 0o600) == 0 else { throw posixError("setting a store file mode", errno) }
        }
    }

    /// Refuses an existing regular file its owner cannot both read and write (e.g. 0400: made
    /// read-only on purpose, perhaps kept as evidence): a writing open never loosens a mode.
    /// Nothing is changed. A missing file, or one that is not a regular file, is left to the
    /// other checks.
    /// - Throws: `unsafeFileLayout`, naming the mode.
    static func refuseReadOnly(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
        let name = sqliteSuffixes.contains(where: { path.hasSuffix($0) }) ? "database side file" : "database file"
        try refuseReadOnly(info, name: name)
    }

    private static func refuseReadOnly(_ info: stat, name: String) throws {
        let owner = mode_t(S_IRUSR | S_IWUSR)
        guard info.st_mode & owner != owner else { return }
        let mode = modeText(info.st_mode)
        throw TokenStoreError(
            .unsafeFileLayout,
            "The \(name) is \(info.st_mode & mode_t(S_IWUSR) == 0 ? "read-only" : "not readable by its owner") (mode \(mode)): "
                + "a writing open does not loosen a mode; nothing was changed.",
            hint: "The commands that only read still work. To write to the store again, make it 0600 yourself (chmod 0600).",
            cause: .posix(errno: EACCES, operation: "open"))
    }

    static func unsafe(_ message: String) -> TokenStoreError {
        TokenStoreError(.unsafeFileLayout, message, hint: "Move the store to a private directory (mode 0700) that only this user owns.")
    }

    static func posixError(_ operation: String, _ code: Int32) -> TokenStoreError {
        fileSystemError(operation, code)
    }

    /// The size in bytes of the file at `path` (not following a link); nil when there is none.
    package static func fileSize(of path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    /// The mode bits (e.g. 0o600) of a path, for status displays and tests.
    package static func mode(of path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o7777)
    }
}
