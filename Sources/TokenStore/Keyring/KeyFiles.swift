import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The file routines of the key providers that keep a wrapped data key in a file of its own
/// (``PassphraseKeyProvider``, ``PortalKeyProvider``): read with `O_NOFOLLOW` and checked
/// (a regular file of this user, mode 0600 or stricter, at most 4 KiB), written atomically
/// (a new file, then rename), erased (zeros, synced) before it is unlinked.
enum KeyFiles {
    /// The largest file accepted as a wrapped-key file.
    static let maximumSize = 4_096

    /// Reads the wrapped-key file at `path`; `nil` when there is none.
    /// - Throws: `unsafeFileLayout` (a link, not a regular file, another owner, readable by
    ///   others), `integrityCheckFailed` (too large), `ioError`.
    static func read(_ path: String) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            if errno == ELOOP { throw unsafe("The wrapped-key file is a symbolic link; refusing to open it.") }
            throw posix("opening a wrapped-key file", errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw posix("inspecting a wrapped-key file", errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw unsafe("The wrapped-key path is not a regular file.") }
        guard info.st_uid == geteuid() else { throw unsafe("The wrapped-key file is owned by another user.") }
        guard info.st_mode & 0o077 == 0 else { throw unsafe("The wrapped-key file is accessible to other users; make it 0600.") }
        guard info.st_size <= maximumSize else {
            throw TokenStoreError(.integrityCheckFailed, "The wrapped-key file is too large to be one.")
        }
        do {
            return try POSIXFile.readToEnd(fd, capacity: Int(info.st_size) + 1) { Array($0) }
        } catch let failure as POSIXFile.Failure {
            throw posix("reading a wrapped-key file", failure.errno)
        }
    }

    /// Writes `bytes` as the file at `path` (mode 0600): a new file, synced, renamed over the
    /// old one, so a reader sees the old file or the new one, never a mix.
    static func write(_ bytes: [UInt8], to path: String, directory: String) throws {
        try FileLayout.prepareDirectory(directory, what: "key")
        do {
            try POSIXFile.writeAtomically(bytes, to: path)
        } catch let failure as POSIXFile.Failure {
            throw posix("writing a wrapped-key file (\(failure.operation))", failure.errno)
        }
    }

    /// Erases (see ``overwrite(_:)``) and unlinks the file at `path`; nothing when there is none.
    static func delete(_ path: String) throws {
        guard try overwrite(path) else { return }
        if unlink(path) != 0, errno != ENOENT { throw posix("deleting a wrapped-key file", errno) }
        FileLayout.syncDirectory(of: path)
    }

    /// Whether anything exists at `path` (a link is not followed).
    static func exists(_ path: String) throws -> Bool {
        var info = stat()
        if lstat(path, &info) == 0 { return true }
        guard errno == ENOENT || errno == ENOTDIR else { throw posix("inspecting a wrapped-key file", errno) }
        return false
    }

    /// Overwrites the regular file at `path` with zeros and syncs it; false when there is none.
    /// A link is not followed (it is only unlinked).
    static func overwrite(_ path: String) throws -> Bool {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return false }
            if errno == ELOOP { return true }  // a link: nothing of ours to overwrite, unlink it
            throw posix("opening a wrapped-key file to erase it", errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw posix("inspecting a wrapped-key file", errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= maximumSize else { return true }
        let zeros = [UInt8](repeating: 0, count: Int(info.st_size))
        var written = 0
        while written < zeros.count {
            let n = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, zeros.count - written, off_t(written)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw posix("erasing a wrapped-key file", errno)
            }
            written += n
        }
        guard fsync(fd) == 0 else { throw posix("syncing an erased wrapped-key file", errno) }
        return true
    }

    /// Whether `id` is a key reference id a file may be named after: 1–64 lowercase hex digits.
    static func checkHex(_ reference: DataKeyReference) throws {
        for id in [reference.storeID, reference.keyID] {
            guard (1...64).contains(id.utf8.count),
                  id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
            else { throw TokenStoreError(.invalidInput, "A key reference id is not lowercase hex.") }
        }
    }

    static func unsafe(_ message: String) -> TokenStoreError {
        TokenStoreError(.unsafeFileLayout, message, hint: "Keep wrapped-key files in a private directory (0700) owned by this user.")
    }

    static func posix(_ operation: String, _ code: Int32) -> TokenStoreError {
        TokenStoreError(.ioError, "A file-system call failed while \(operation).", cause: .posix(errno: code, operation: operation))
    }
}
