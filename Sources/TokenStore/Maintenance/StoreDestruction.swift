import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The explicit confirmation ``TokenStore/destroyStore(confirm:)`` requires.
public enum StoreDestructionConfirmation: Sendable {
    /// Delete the database, its -wal and -shm files and every data key of the store.
    case yesDestroyEverything
}

extension TokenStore {
    /// Deletes the store: its data keys from the key provider, then the database, its
    /// -wal, -shm and lock files and the session layer's discovery cache. The store object is closed first; later calls throw
    /// `storeClosed`.
    ///
    /// Keys go first: a crash in between leaves a database whose key is missing (destroy it
    /// again), never a key item nobody knows about.
    /// - Warning: every secret, every pending revocation and the whole history are gone for
    ///   good. Other processes that have the store open keep writing to deleted files.
    /// - Throws: `keyringLocked`, `secretServiceUnavailable`, `timedOut` (the database is
    ///   untouched; the Secret Service may still carry out a deletion it had received, so
    ///   call again), `ioError`.
    public func destroyStore(confirm: StoreDestructionConfirmation) throws {
        close()
        try Self.destroyStore(path: path, appID: appID, keyProvider: keyProvider, confirm: confirm)
    }

    /// Deletes the store at `path` without opening it (its key may be missing or locked
    /// away): the data keys it records, then the database, its -wal, -shm and lock
    /// files and the discovery cache. Succeeds when there is nothing left to delete.
    /// - Warning: every secret, every pending revocation and the whole history are gone for good.
    /// - Throws: as ``destroyStore(confirm:)``, and `invalidInput`, `databaseCorrupt`, `notAStore` (another
    ///   program's database at `path`: nothing is deleted), `wrongKeyProvider` (the store records another
    ///   kind of key provider than `keyProvider`: nothing is deleted).
    public static func destroyStore(
        path: String, appID: String, keyProvider: (any KeyProvider)? = nil,
        confirm: StoreDestructionConfirmation
    ) throws {
        try validateAppID(appID)
        switch confirm { case .yesDestroyEverything: break }
        let keyProvider = keyProvider ?? KeyProviderSelection.automatic(storePath: path)
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                throw TokenStoreError(.unsafeFileLayout, "The database path is not a regular file; refusing to delete it.")
            }
            // Another program's database is refused, never deleted.
            if info.st_size > 0 { try StoreIdentity.check(path: path) }
            let (storeID, keyIDs) = try recordedKeys(path: path, provider: keyProvider)
            if let storeID {
                for keyID in keyIDs {
                    try keyProvider.deleteKey(DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID))
                }
                try keyProvider.deleteStoreEpoch(storeID: Hex.encode(storeID))
                try deleteSlotKeys(path: path, appID: appID, storeID: storeID, keyProvider: keyProvider)
            }
        } else if errno != ENOENT {
            throw TokenStoreError(.ioError, "Could not inspect the database file.", cause: .posix(errno: errno, operation: "lstat"))
        }
        for file in FileLayout.allFiles(of: path) {
            if unlink(file) != 0 && errno != ENOENT {
                throw TokenStoreError(.ioError, "Could not delete a store file.", cause: .posix(errno: errno, operation: "unlink"))
            }
        }
        FileLayout.syncDirectory(of: path)
    }

    /// The store id and every recorded key id of the database at `path`, read without keys.
    /// A store that records another kind of key provider than `provider` is refused
    /// (`wrongKeyProvider`): destroyed under the wrong provider, its key items would stay behind.
    /// The keys the store's key slots filed under their own ids: through `keyProvider` for its
    /// kind (its errors thrown, as for the data key), best effort through a provider made for
    /// each other kind (one that cannot be reached keeps its item: it opens nothing once the
    /// database is gone).
    private static func deleteSlotKeys(path: String, appID: String, storeID: [UInt8], keyProvider: any KeyProvider) throws {
        let rows = try KeySlots.unchecked(try Database.openForReading(path: path))
        for row in rows where row.sealed == nil {
            let reference = DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(row.keyRef), appID: appID)
            if row.kind == keyProvider.kind {
                try keyProvider.deleteKey(reference)
            } else {
                try? provider(for: row.kind, storePath: path)?.deleteKey(reference)
            }
        }
    }

    private static func recordedKeys(path: String, provider: any KeyProvider) throws -> ([UInt8]?, [[UInt8]]) {
        let db = try Database.openForReading(path: path)
        let tables = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('store_info', 'data_keys')") ?? 0
        guard tables == 2 else { return (nil, []) }
        try KeyProviderRecord.refuseOtherProvider(db, provider: provider)
        let storeID = try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", []) { $0.blob(0) }
        var keyIDs: [[UInt8]] = []
        try db.forEachRow("SELECT key_id FROM data_keys") { keyIDs.append($0.blob(0)) }
        return (storeID, keyIDs)
    }

}
