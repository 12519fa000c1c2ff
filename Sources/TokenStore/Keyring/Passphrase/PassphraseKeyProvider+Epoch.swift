import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

extension PassphraseKeyProvider {
    /// The path of the file holding the store epoch: `tokenstore-<store-id>.epoch` in ``directory``.
    /// - Throws: `invalidInput` when the id is not hex.
    public func epochFilePath(storeID: String) throws -> String {
        try StoreEpochFiles(directory: directory).path(storeID: storeID)
    }

    /// The store's epoch from its file in ``directory``; 0 when there is no file.
    /// - Throws: `integrityCheckFailed` (the file is damaged), `unsafeFileLayout`, `invalidInput`, `ioError`.
    public func storeEpoch(storeID: String) throws -> UInt64 {
        try StoreEpochFiles(directory: directory).epoch(storeID: storeID)
    }

    /// Raises the store's epoch (see `StoreEpochFiles.raise(storeID:to:)`).
    /// - Throws: `integrityCheckFailed`, `unsafeFileLayout`, `invalidInput`, `ioError`.
    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        try StoreEpochFiles(directory: directory).raise(storeID: storeID, to: epoch)
    }

    /// Deletes the store's epoch file. Succeeds when there is none.
    /// - Throws: `invalidInput`, `ioError`.
    public func deleteStoreEpoch(storeID: String) throws {
        try StoreEpochFiles(directory: directory).delete(storeID: storeID)
    }
}

/// Store epochs kept as files (`tokenstore-<store-id>.epoch`) in a private directory, for the
/// key providers that keep their keys in files: ``PassphraseKeyProvider`` (its key directory)
/// and ``PortalKeyProvider`` (the passphrase provider's default directory under
/// `$XDG_STATE_HOME`, apart from the store's own directory so restoring that folder does not
/// roll the epoch back with it).
struct StoreEpochFiles {
    let directory: String

    func path(storeID: String) throws -> String {
        try SecretServiceKeyProvider.validateStoreID(storeID)
        return "\(directory)/tokenstore-\(storeID).epoch"
    }

    /// The store's epoch; 0 when there is no file.
    func epoch(storeID: String) throws -> UInt64 {
        guard let bytes = try KeyFiles.read(path(storeID: storeID)) else { return 0 }
        return try StoreEpochFile.decode(bytes)
    }

    /// Replaces the file atomically (a new file renamed over the old one), under an advisory
    /// lock on the directory so two processes never lower it. Nothing is written when the file
    /// already holds `epoch` or more.
    func raise(storeID: String, to epoch: UInt64) throws {
        let path = try path(storeID: storeID)
        try FileLayout.prepareDirectory(directory, what: "key")
        try withDirectoryLock {
            let current = try KeyFiles.read(path).map(StoreEpochFile.decode) ?? 0
            guard current < epoch else { return }
            do {
                try POSIXFile.writeAtomically(StoreEpochFile.encode(epoch), to: path)
            } catch let failure as POSIXFile.Failure {
                throw KeyFiles.posix("writing the store-epoch file (\(failure.operation))", failure.errno)
            }
        }
    }

    func delete(storeID: String) throws {
        let path = try path(storeID: storeID)
        if unlink(path) != 0, errno != ENOENT { throw KeyFiles.posix("deleting the store-epoch file", errno) }
        FileLayout.syncDirectory(of: path)
    }

    private func withDirectoryLock(_ body: () throws -> Void) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw KeyFiles.posix("opening the key directory", errno) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw KeyFiles.posix("locking the key directory", errno) }
        }
        defer { flock(fd, LOCK_UN) }
        try body()
    }
}

/// The store-epoch file, version 1 (45 bytes): `"TSEP" ‖ version u8 ‖ epoch u64le ‖ checksum (32)`,
/// the checksum an unkeyed BLAKE2b over what precedes it (damage, not an attacker: one who can
/// write the key directory can roll the epoch back, as documented).
enum StoreEpochFile {
    static let magic = Array("TSEP".utf8)
    static let version: UInt8 = 1
    static let totalCount = 4 + 1 + 8 + 32

    static func encode(_ epoch: UInt64) -> [UInt8] {
        let body = magic + [version] + withUnsafeBytes(of: epoch.littleEndian) { Array($0) }
        return body + Blake2b.digest(body)
    }

    static func decode(_ bytes: [UInt8]) throws -> UInt64 {
        let body = Array(bytes.prefix(totalCount - 32))
        guard bytes.count == totalCount, Array(body.prefix(4)) == magic, body[4] == version,
            Blake2b.digest(body) == Array(bytes.suffix(32))
        else {
            throw TokenStoreError(
                .integrityCheckFailed, "The store-epoch file was altered or damaged.",
                hint: "Delete it; the next open of the store writes it again.")
        }
        return (0..<8).reduce(UInt64(0)) { $0 | UInt64(body[5 + $1]) << (8 * UInt64($1)) }
    }
}
