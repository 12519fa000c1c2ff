import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The few POSIX file routines the store, the passphrase key provider and tokenctl share:
/// read-to-end into a wiped buffer, an atomic durable write, and a directory fsync.
package enum POSIXFile {
    /// A failed system call: what was being done and its errno.
    package struct Failure: Error {
        package let operation: String
        package let errno: Int32
    }

    /// Reads `fd` until its end or until `capacity` bytes, retrying a read a signal interrupted,
    /// and lends `body` the bytes read. The buffer is wiped and freed when this returns, so
    /// `body` copies what it keeps.
    /// - Throws: ``Failure`` when a read fails; whatever `body` throws.
    package static func readToEnd<T>(
        _ fd: Int32, capacity: Int, _ body: (Slice<UnsafeBufferPointer<UInt8>>) throws -> T
    ) throws -> T {
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(capacity, 1))
        buffer.initialize(repeating: 0)
        defer {
            explicit_bzero(buffer.baseAddress!, buffer.count)
            buffer.deallocate()
        }
        var count = 0
        while count < capacity {
            let n = read(fd, buffer.baseAddress! + count, capacity - count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw Failure(operation: "read", errno: errno) }
            if n == 0 { break }
            count += n
        }
        return try body(UnsafeBufferPointer(buffer)[0..<count])
    }

    /// Replaces the file at `path` with `bytes` atomically and durably: a new 0600 file beside
    /// it (never through a symlink), written, fsynced, renamed over `path`, and the directory
    /// fsynced. A failure leaves `path` as it was and removes the temporary file.
    /// - Throws: ``Failure``.
    package static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let temporary = "\(path).\(Hex.encode(SecretBytes.random(count: 8).copyBytes())).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(operation: "create", errno: errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            guard fchmod(fd, 0o600) == 0 else { throw Failure(operation: "fchmod", errno: errno) }
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw Failure(operation: "write", errno: errno) }
                written += n
            }
            guard fsync(fd) == 0 else { throw Failure(operation: "fsync", errno: errno) }
        }
        guard rename(temporary, path) == 0 else { throw Failure(operation: "rename", errno: errno) }
        renamed = true
        syncDirectory(of: path)
    }

    /// Writes all of `bytes` to `fd`, retrying short and interrupted writes; gives up silently
    /// on an error (for standard error and the like, where there is no one to tell).
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                written += n
            }
        }
    }

    /// fsyncs the directory holding `path`, so deletions and renames are durable.
    package static func syncDirectory(of path: String) {
        let directory = PathNames.directory(of: path)
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }
}
