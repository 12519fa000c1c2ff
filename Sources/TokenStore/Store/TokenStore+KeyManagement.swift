import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension TokenStore {
    /// Options of a store, fixed at open.
    public struct Options: Sendable, Equatable {
        /// Rotate the data key when the last account is logged out (no items and no pending
        /// revocations left), so that ciphertext left in free pages, the WAL or old backups
        /// cannot be opened with the current key (crypto-erase). On by default.
        public var rotatesKeyAfterLastLogout: Bool

        /// Options with the defaults.
        public init(rotatesKeyAfterLastLogout: Bool = true) {
            self.rotatesKeyAfterLastLogout = rotatesKeyAfterLastLogout
        }
    }
}

/// The explicit confirmation ``TokenStore/destroyStore(confirm:)`` requires.
public enum StoreDestructionConfirmation: Sendable {
    /// Delete the database, its -wal and -shm files and every data key of the store.
    case yesDestroyEverything
}

/// The explicit confirmation ``TokenStore/resetStore(path:appID:keyProvider:confirm:)`` requires.
public enum StoreResetConfirmation: Sendable {
    /// Destroy every sealed row (secrets, pending revocations, keys); keep the history.
    case yesDiscardSealedData
}

/// What ``TokenStore/rotateDataKey(batchSize:progress:)`` did.
public struct KeyRotationReport: Sendable, Equatable {
    /// The key the store used before (hex id).
    public let previousKeyIdentifier: String
    /// The key the store uses now (hex id).
    public let newKeyIdentifier: String
    /// Rows re-sealed under the new key (items, pending revocations, credential states).
    public let rowsResealed: Int
    /// Batch transactions run (not counting the switch).
    public let batches: Int
    /// True when an interrupted rotation was picked up and finished.
    public let resumed: Bool
}

/// What ``TokenStore/resetStore(path:appID:keyProvider:confirm:)`` destroyed and recorded.
public struct StoreResetReport: Sendable, Equatable {
    /// Items (secrets) destroyed.
    public let itemsDestroyed: Int
    /// Credential states recorded `revoked` with reason `keyLost` in the history.
    public let credentialStatesRevoked: Int
    /// Pending revocations that could no longer be opened, recorded as lost in the history.
    public let pendingRevocationsLost: Int
    /// The data keys the store no longer knows (hex ids).
    public let discardedKeyIdentifiers: [String]
    /// The new data key (hex id).
    public let newKeyIdentifier: String
}

/// One data key a store knows, for diagnostics (`tokenctl status`).
public struct DataKeyInfo: Sendable, Equatable {
    /// Where a key is in its life.
    public enum Status: String, Sendable {
        /// The key every row is sealed under.
        case active
        /// A rotation to this key has begun and has not switched yet.
        case next
        /// A rotation switched away from this key; its keyring item is being deleted.
        case retired
    }
    /// The key's id (hex).
    public let identifier: String
    public let status: Status
    public let createdAt: Date
}

/// A history entry kept from before a ``TokenStore/resetStore(path:appID:keyProvider:confirm:)``.
public struct CredentialHistoryFromBeforeReset: Sendable, Equatable {
    /// An opaque label for the user (a prefix of the keyed hash under the lost key). Entries
    /// of one user share it; it cannot be linked to a user id any more.
    public let subject: String
    public let transition: CredentialStateTransition
}

extension CredentialStateDetail {
    /// Recorded by a reset for a pending revocation whose token could not be opened any more:
    /// it was never revoked at the server.
    public static let pendingRevocationLost = "pendingRevocationLost"
}

extension TokenStore {
    // MARK: Rotation

    /// Makes a new data key, re-seals every row under it, switches the store to it, and only
    /// then deletes the old key from the key provider.
    ///
    /// The steps, each safe against a crash:
    /// 1. The new key is recorded as `next` (with its own key check) and stored in the key
    ///    provider.
    /// 2. Batches of `batchSize` rows — items, pending revocations, credential states — are
    ///    opened under the active key and re-sealed under the new one, with their keyed
    ///    hashes recomputed, into work tables; each batch is one `BEGIN IMMEDIATE`
    ///    transaction and `progress` is called after it with (done, total). The live rows are
    ///    not touched: every read and write of this and other processes goes on as usual
    ///    under the active key.
    /// 3. One transaction re-seals what changed since its batch, swaps the re-sealed rows in
    ///    (also remapping the credential history, logout marks and outbox account hashes)
    ///    and makes the new key `active`, the old one `retired`.
    /// 4. The old key is deleted from the key provider, then its record.
    ///
    /// A crash anywhere leaves every row readable under the key the store names as active.
    /// The next open (of any process) finishes the rotation: it picks up the work tables and
    /// completes steps 2–4, or, when the new key never reached the key provider, rolls the
    /// rotation back. Other store objects on the same file follow the switch at their next
    /// transaction. Only one rotation runs at a time (an advisory lock on
    /// `<database>-keyrotation.lock`).
    ///
    /// ```swift
    /// let report = try store.rotateDataKey { done, total in print("\(done)/\(total)") }
    /// ```
    /// - Parameters:
    ///   - batchSize: rows re-sealed per transaction (at least 1).
    ///   - progress: called with (rows done, rows in total) after each batch and at the end.
    /// - Returns: what was done; `resumed` when an interrupted rotation was finished.
    /// - Throws: ``TokenStoreError`` `invalidInput` (batch size), `databaseBusy` (another
    ///   process is rotating, or the database stayed locked), `keyringLocked`,
    ///   `secretServiceUnavailable`, `timedOut` (the key provider; the rotation is resumed
    ///   later), `integrityCheckFailed` (a row does not open: the rotation is rolled back and
    ///   the store keeps its key — run ``verify(progress:)``), `storeClosed`, `ioError`.
    @discardableResult
    public func rotateDataKey(batchSize: Int = 500, progress: ((Int, Int) -> Void)? = nil) throws -> KeyRotationReport {
        guard batchSize >= 1 else { throw TokenStoreError(.invalidInput, "The batch size must be at least 1.") }
        guard let lock = try RotationLock.acquire(storePath: path) else {
            throw TokenStoreError(
                .databaseBusy, "Another process is rotating this store's data key.",
                hint: "Try again when it has finished; an interrupted rotation is finished at the next open.")
        }
        return try withExtendedLifetime(lock) {
            guard let report = try runRotation(batchSize: batchSize, progress: progress, startNew: true) else {
                throw TokenStoreError(.ioError, "The key rotation did not start.")
            }
            return report
        }
    }

    /// The data keys the store records (normally one, `active`), for diagnostics.
    /// - Throws: `storeClosed`, storage errors.
    public func dataKeys() throws -> [DataKeyInfo] {
        try read { db in
            var keys: [DataKeyInfo] = []
            try db.forEachRow("SELECT key_id, status, created_at FROM data_keys ORDER BY created_at, key_id") { row in
                keys.append(DataKeyInfo(
                    identifier: Hex.encode(row.blob(0)), status: DataKeyInfo.Status(rawValue: row.text(1)) ?? .retired,
                    createdAt: Timestamp.date(fromMillis: row.int(2))))
            }
            return keys
        }
    }

    // MARK: Destruction and recovery

    /// Deletes the store: its data keys from the key provider, then the database and its
    /// -wal, -shm and lock files. The store object is closed first; later calls throw
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
    /// away): the data keys it records, then the database and its -wal, -shm and lock
    /// files. Succeeds when there is nothing left to delete.
    /// - Warning: every secret, every pending revocation and the whole history are gone for good.
    /// - Throws: as ``destroyStore(confirm:)``, and `invalidInput`, `databaseCorrupt`.
    public static func destroyStore(
        path: String, appID: String, keyProvider: any KeyProvider = SecretServiceKeyProvider(),
        confirm: StoreDestructionConfirmation
    ) throws {
        try validateAppID(appID)
        switch confirm { case .yesDestroyEverything: break }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                throw TokenStoreError(.unsafeFileLayout, "The database path is not a regular file; refusing to delete it.")
            }
            let (storeID, keyIDs) = try recordedKeys(path: path)
            if let storeID {
                for keyID in keyIDs {
                    try keyProvider.deleteKey(DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID))
                }
            }
        } else if errno != ENOENT {
            throw TokenStoreError(.ioError, "Could not inspect the database file.", cause: .posix(errno: errno, operation: "lstat"))
        }
        for suffix in ["-wal", "-shm", "-journal", "", RotationLock.suffix] {
            if unlink(path + suffix) != 0 && errno != ENOENT {
                throw TokenStoreError(.ioError, "Could not delete a store file.", cause: .posix(errno: errno, operation: "unlink"))
            }
        }
        syncDirectory(of: path)
    }

    /// Starts over after the data key was lost (`dataKeyMissing`), keeping the credential
    /// history. The store cannot be opened while its key is missing, so this works on the
    /// file directly.
    ///
    /// In one transaction it:
    /// - records every credential state as `revoked` with reason `keyLost` in the history;
    /// - records every pending revocation — whose refresh token can no longer be opened and
    ///   so was never revoked at the server — in the history as lost (reason `keyLost`,
    ///   detail ``CredentialStateDetail/pendingRevocationLost``);
    /// - deletes every sealed row (items, pending revocations, credential states, logout
    ///   marks, key records).
    /// The store's data keys are deleted from the key provider first (so a locked keyring
    /// fails the reset before anything changes), and afterwards a fresh key is made: the
    /// store opens normally.
    ///
    /// What survives, and how to read it: the history rows stay in the file, but they are
    /// filed under keyed hashes of the lost key, so lookups by user id
    /// (``credentialState(forUserID:)``, ``credentialStateHistory(forUserID:)``) can no
    /// longer find them — a user seen before the reset is `notFound` until recorded again.
    /// Read them with ``credentialHistoryFromBeforeReset()``, where entries of one user share
    /// an opaque subject label. Apps that keep user ids elsewhere can re-record
    /// `revoked`/`keyLost` for them after the reset.
    /// - Warning: every secret is gone for good, and refresh tokens that were waiting to be
    ///   revoked stay valid at the server until they expire.
    /// - Throws: `keyringLocked`, `secretServiceUnavailable`, `timedOut` (the database is
    ///   unchanged; the Secret Service may still carry out a request it had received),
    ///   `invalidInput`, `unsafeFileLayout`, `databaseCorrupt`, `databaseBusy`, `schemaTooNew`, `ioError`.
    @discardableResult
    public static func resetStore(
        path: String, appID: String, keyProvider: any KeyProvider = SecretServiceKeyProvider(),
        confirm: StoreResetConfirmation
    ) throws -> StoreResetReport {
        try validateAppID(appID)
        switch confirm { case .yesDiscardSealedData: break }
        try FileLayout.prepare(databasePath: path)
        var counts = (items: 0, states: 0, outbox: 0)
        var discarded: [String] = []
        do {
            let db = try Database(path: path)
            _ = try Migrator().migrate(db)
            let storeID = try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", []) { $0.blob(0) }
            var keyIDs: [[UInt8]] = []
            try db.forEachRow("SELECT key_id FROM data_keys") { keyIDs.append($0.blob(0)) }
            if let storeID {
                for keyID in keyIDs {
                    try keyProvider.deleteKey(DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID))
                }
            }
            discarded = keyIDs.map(Hex.encode)
            counts = try db.writeTransaction {
                let now = Timestamp.nowMillis()
                var states: [([UInt8], String)] = []
                try db.forEachRow("SELECT user_ref, state FROM credential_states ORDER BY updated_at, user_ref") {
                    states.append(($0.blob(0), $0.text(1)))
                }
                for (ref, state) in states {
                    try db.run(
                        "INSERT INTO credential_history(user_ref, at, from_state, to_state, reason, detail) VALUES (?, ?, ?, 'revoked', ?, NULL)",
                        [.blob(ref), .int(now), .text(state), .text(CredentialStateReason.keyLost.rawValue)])
                }
                var lost: [[UInt8]] = []
                try db.forEachRow("SELECT account_ref FROM pending_revocations ORDER BY created_at, entry_id") { lost.append($0.blob(0)) }
                for ref in lost {
                    // The user id is sealed in the entry; the account hash stands in for it.
                    try db.run(
                        "INSERT INTO credential_history(user_ref, at, from_state, to_state, reason, detail) VALUES (?, ?, 'revoked', 'revoked', ?, ?)",
                        [.blob(ref), .int(now), .text(CredentialStateReason.keyLost.rawValue),
                         .text(CredentialStateDetail.pendingRevocationLost)])
                }
                let items = Int(try db.scalarInt("SELECT count(*) FROM items") ?? 0)
                for table in ["items", "pending_revocations", "credential_states", "account_marks", "data_keys"] + rotationTables {
                    try db.run("DELETE FROM \(table)")
                }
                let lastHistory = try db.scalarInt("SELECT coalesce(max(id), 0) FROM credential_history") ?? 0
                try db.run(
                    "INSERT INTO store_resets(at, last_history_id, items_destroyed, states_revoked, outbox_lost) VALUES (?, ?, ?, ?, ?)",
                    [.int(now), .int(lastHistory), .int(Int64(items)), .int(Int64(states.count)), .int(Int64(lost.count))])
                return (items, states.count, lost.count)
            }
            try db.checkpoint()
        }
        let store = try TokenStore(path: path, appID: appID, keyProvider: keyProvider)
        defer { store.close() }
        return StoreResetReport(
            itemsDestroyed: counts.items, credentialStatesRevoked: counts.states, pendingRevocationsLost: counts.outbox,
            discardedKeyIdentifiers: discarded, newKeyIdentifier: store.keyIdentifier)
    }

    /// The credential history recorded before the store was reset (see
    /// ``resetStore(path:appID:keyProvider:confirm:)``), oldest first. These entries cannot
    /// be found by user id any more; entries of one user share a ``CredentialHistoryFromBeforeReset/subject``.
    /// Empty when the store was never reset.
    public func credentialHistoryFromBeforeReset() throws -> [CredentialHistoryFromBeforeReset] {
        try read { db in
            guard let last = try db.scalarInt("SELECT max(last_history_id) FROM store_resets") else { return [] }
            var entries: [CredentialHistoryFromBeforeReset] = []
            try db.forEachRow(
                "SELECT user_ref, at, from_state, to_state, reason, detail FROM credential_history WHERE id <= ? ORDER BY id",
                [.int(last)]
            ) { row in
                entries.append(CredentialHistoryFromBeforeReset(
                    subject: Hex.encode(Array(row.blob(0).prefix(8))),
                    transition: CredentialStateTransition(
                        date: Timestamp.date(fromMillis: row.int(1)),
                        from: CredentialState(rawValue: row.text(2)) ?? .notFound,
                        to: CredentialState(rawValue: row.text(3)) ?? .notFound,
                        reason: CredentialStateReason(rawValue: row.text(4)), detail: row.textOrNil(5))))
            }
            return entries
        }
    }

    // MARK: Internals used by TokenStore and the outbox

    static let rotationTables = ["rotation_items", "rotation_pending", "rotation_states", "rotation_refs"]

    /// Inside a transaction: if another store object switched the store to a new key, load
    /// it (from the key provider, checked against its key check) and use it from now on.
    func followKeyRotation(_ db: Database) throws {
        guard let active = try db.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", [], { $0.blob(0) }) else {
            throw TokenStoreError(
                .dataKeyMissing, "The store records no active data key any more (it was reset or destroyed meanwhile).",
                hint: "Open the store again.")
        }
        guard active != dataKey.keyID else { return }
        guard let key = try loadDataKey(db, keyID: active) else {
            throw TokenStoreError(
                .dataKeyMissing, "The store's new data key is missing from the key provider (\(keyProvider.name)).",
                hint: "Restore the keyring that held the key, or reset the store explicitly (resetStore) to start over.")
        }
        replaceDataKey(key)
        logger.info("followed a key rotation made by another store object")
    }

    /// At open: finishes a rotation a crash interrupted, and runs a crypto-erase that is owed
    /// (the rotation after the last logout could not run then), unless another process is
    /// rotating. A failure here is logged and leaves the store as it was (every row readable);
    /// the next open or ``rotateDataKey(batchSize:progress:)`` tries again.
    func recoverInterruptedRotation() {
        do {
            let (unfinished, owed) = try withDatabase { db in
                (try db.scalarInt("SELECT count(*) FROM data_keys WHERE status != 'active'") ?? 0,
                 try db.scalarInt("SELECT count(*) FROM store_info WHERE erase_owed_since IS NOT NULL") ?? 0)
            }
            let eraseOwed = owed > 0 && options.rotatesKeyAfterLastLogout
            guard unfinished > 0 || eraseOwed else { return }
            guard let lock = try RotationLock.acquire(storePath: path) else { return }
            try withExtendedLifetime(lock) {
                if let report = try runRotation(batchSize: 500, progress: nil, startNew: eraseOwed) {
                    logger.info(
                        eraseOwed ? "ran the crypto-erase owed since a logout" : "finished an interrupted key rotation",
                        metadata: ["rows": "\(report.rowsResealed)"])
                }
            }
        } catch {
            logger.info("an interrupted key rotation could not be finished now", metadata: ["error": Self.code(of: error)])
        }
    }

    func holdsNoSecrets(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending_revocations)") ?? 0) == 0
    }

    /// In the transaction that may have removed the store's last secret: when nothing secret
    /// is left, records that a crypto-erase is owed (unless turned off in ``Options``), so that
    /// a rotation which cannot run now is run at a later open. Returns whether the store is empty.
    func markEraseOwedIfEmpty(_ db: Database) throws -> Bool {
        guard try holdsNoSecrets(db) else { return false }
        if options.rotatesKeyAfterLastLogout {
            try db.run(
                "UPDATE store_info SET erase_owed_since = coalesce(erase_owed_since, ?) WHERE id = 1", [.int(Timestamp.nowMillis())])
        }
        return true
    }

    /// Crypto-erase: after the last account was logged out, rotate the key (unless turned
    /// off in ``Options``). The logout itself has succeeded; a rotation that cannot run now
    /// is logged, stays owed (`store_info.erase_owed_since`) and is run at a later open.
    func cryptoEraseAfterLastLogout() {
        guard options.rotatesKeyAfterLastLogout else { return }
        do {
            guard let lock = try RotationLock.acquire(storePath: path) else {
                logger.info("crypto-erase skipped: another process is rotating the key")
                return
            }
            try withExtendedLifetime(lock) {
                _ = try runRotation(batchSize: 500, progress: nil, startNew: true)
            }
            logger.info("rotated the data key after the last logout")
        } catch {
            logger.info("could not rotate the data key after the last logout", metadata: ["error": Self.code(of: error)])
        }
    }

    static func code(of error: any Error) -> String {
        (error as? TokenStoreError)?.code.rawValue ?? "unexpected"
    }

    // MARK: The rotation itself (the caller holds the rotation lock)

    private func reference(_ keyID: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
    }

    /// The key `keyID` from the provider, checked against its key check; nil when the provider has none.
    private func loadDataKey(_ db: Database, keyID: [UInt8]) throws -> DataKey? {
        guard let material = try keyProvider.loadKey(reference(keyID)) else { return nil }
        let key = try DataKey(keyID: keyID, material: material)
        try KeySetup.verifyKeyCheck(database: db, storeID: storeID, key: key)
        return key
    }

    /// Runs (or resumes) a rotation. With `startNew` false only an interrupted one is
    /// finished; returns nil when there was none.
    private func runRotation(batchSize: Int, progress: ((Int, Int) -> Void)?, startNew: Bool) throws -> KeyRotationReport? {
        try deleteRetiredKeys()
        var resumed = false
        var next: DataKey?
        if let nextID = try read({ db in try db.firstRow("SELECT key_id FROM data_keys WHERE status = 'next'", [], { $0.blob(0) }) }) {
            do {
                next = try read { db in try loadDataKey(db, keyID: nextID) }
            } catch let error as TokenStoreError where error.code == .dataKeyCorrupt {
                next = nil
            }
            if next == nil {
                logger.info("rolling back a key rotation whose new key never reached the key provider")
                try rollBack(nextID)
            } else {
                resumed = true
            }
        }
        if next == nil {
            guard startNew else { return nil }
            next = try beginNewKey()
        }
        guard let next else { return nil }
        do {
            return try reseal(to: next, batchSize: batchSize, progress: progress, resumed: resumed)
        } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
            // A row that does not open can never be re-sealed: give the rotation up whole.
            logger.info("key rotation rolled back: a row does not open")
            try rollBack(next.keyID)
            throw error
        }
    }

    /// Step 1: records the new key as `next`, then stores it in the key provider. A crash in
    /// between leaves a record without a key, which the next run rolls back.
    private func beginNewKey() throws -> DataKey {
        let key = try DataKey.generate()
        try write { db in
            for table in Self.rotationTables { try db.run("DELETE FROM \(table)") }
            try db.run(
                "INSERT INTO data_keys(key_id, status, key_check, created_at) VALUES (?, 'next', ?, ?)",
                [.blob(key.keyID), .blob(KeySetup.sealKeyCheck(storeID: storeID, key: key)), .int(Timestamp.nowMillis())])
        }
        do {
            try keyProvider.storeKey(key.material, for: reference(key.keyID))
        } catch let error as TokenStoreError where error.code == .timedOut {
            // The Secret Service may still store it after we stopped waiting. Keep the record:
            // the next run resumes with the key if it arrived, or rolls back (deleting the key
            // item) if not, so no key item is left that the store does not know of.
            throw error
        } catch {
            do { try write { db in try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'next'", [.blob(key.keyID)]) } } catch {
                logger.info("could not remove the record of a key that was not stored; the next open does", metadata: ["error": Self.code(of: error)])
            }
            throw error
        }
        CrashPoint.reach("rotate.afterNewKey")
        return key
    }

    /// Undoes an unfinished rotation: the new key leaves the provider first, then its record
    /// and the work tables (a crash in between is rolled back again).
    private func rollBack(_ nextID: [UInt8]) throws {
        try keyProvider.deleteKey(reference(nextID))
        try write { db in
            for table in Self.rotationTables { try db.run("DELETE FROM \(table)") }
            try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'next'", [.blob(nextID)])
        }
    }

    /// Steps 2–4.
    private func reseal(to next: DataKey, batchSize: Int, progress: ((Int, Int) -> Void)?, resumed: Bool) throws -> KeyRotationReport {
        let (total, alreadyDone) = try read { db in
            (Int(try db.scalarInt(
                "SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending_revocations) + (SELECT count(*) FROM credential_states)") ?? 0),
             Int(try db.scalarInt(
                "SELECT (SELECT count(*) FROM rotation_items) + (SELECT count(*) FROM rotation_pending) + (SELECT count(*) FROM rotation_states)") ?? 0))
        }
        let previous = try read { _ in dataKey.keyID }
        var done = min(alreadyDone, total)
        var resealed = 0
        var batches = 0
        progress?(done, total)
        for table in ResealTable.allCases {
            var cursor: [UInt8] = []
            while true {
                let (count, last) = try write { db in try resealStale(db, table, to: next, after: cursor, limit: batchSize) }
                guard count > 0, let last else { break }
                cursor = last
                done = min(done + count, total)
                resealed += count
                batches += 1
                progress?(done, total)
                CrashPoint.reach("rotate.afterBatch")
            }
        }
        resealed += try switchKeys(to: next)
        CrashPoint.reach("rotate.afterSwitch")
        try deleteRetiredKeys()
        checkpointQuietly()
        let finalTotal = max(total, done)
        progress?(finalTotal, finalTotal)
        return KeyRotationReport(
            previousKeyIdentifier: Hex.encode(previous), newKeyIdentifier: Hex.encode(next.keyID),
            rowsResealed: resealed, batches: batches, resumed: resumed)
    }

    enum ResealTable: CaseIterable { case items, pending, states }

    /// Re-seals up to `limit` live rows of `table` (after `cursor`) that have no up-to-date
    /// copy in the work tables. Returns how many, and the last row key.
    private func resealStale(
        _ db: Database, _ table: ResealTable, to next: DataKey, after cursor: [UInt8], limit: Int
    ) throws -> (Int, [UInt8]?) {
        var rows: [([UInt8], Int64, [UInt8], [UInt8], [UInt8])] = []
        let sql: String
        switch table {
        case .items:
            sql = """
                SELECT i.lookup, i.kind, i.key_id, i.sealed, i.account_ref FROM items i
                LEFT JOIN rotation_items r ON r.old_lookup = i.lookup AND r.old_sealed = i.sealed
                WHERE r.old_lookup IS NULL AND i.lookup > ? ORDER BY i.lookup LIMIT ?
                """
        case .pending:
            sql = """
                SELECT p.entry_id, 0, p.key_id, p.sealed, p.account_ref FROM pending_revocations p
                LEFT JOIN rotation_pending r ON r.entry_id = p.entry_id AND r.old_sealed = p.sealed
                WHERE r.entry_id IS NULL AND p.entry_id > ? ORDER BY p.entry_id LIMIT ?
                """
        case .states:
            sql = """
                SELECT s.user_ref, 0, s.key_id, s.sealed_user, s.user_ref FROM credential_states s
                LEFT JOIN rotation_states r ON r.old_user_ref = s.user_ref AND r.old_sealed = s.sealed_user
                WHERE r.old_user_ref IS NULL AND s.user_ref > ? ORDER BY s.user_ref LIMIT ?
                """
        }
        try db.forEachRow(sql, [.blob(cursor), .int(Int64(limit))]) { row in
            rows.append((row.blob(0), row.int(1), row.blob(2), row.blob(3), row.blob(4)))
        }
        for (rowKey, kindCode, keyID, sealed, ref) in rows {
            switch table {
            case .items:
                let fields = try open(sealed, keyID: keyID, kind: .item, rowKey: rowKey)
                guard let service = fields.string(.service), let account = fields.string(.account),
                      let code = fields.bytes(.itemKind), code.count == 1, Int64(code[0]) == kindCode,
                      let kind = ItemKind(code: kindCode)
                else { throw TokenStoreError(.integrityCheckFailed, "A sealed item is missing fields.") }
                let key = ItemKey(service: service, account: account, kind: kind)
                guard itemLookup(key) == rowKey, accountRef(service: service, account: account) == ref else {
                    throw TokenStoreError(.integrityCheckFailed, "A sealed item does not belong to the row it was found in.")
                }
                let lookup = itemLookup(key, under: next)
                let newRef = accountRef(service: service, account: account, under: next)
                try db.run(
                    "INSERT OR REPLACE INTO rotation_items(old_lookup, old_sealed, lookup, account_ref, sealed) VALUES (?, ?, ?, ?, ?)",
                    [.blob(rowKey), .blob(sealed), .blob(lookup), .blob(newRef), .blob(seal(fields, .item, rowKey: lookup, under: next))])
                try mapRef(db, domain: 2, from: ref, to: newRef)
            case .pending:
                let fields = try open(sealed, keyID: keyID, kind: .pendingRevocation, rowKey: rowKey)
                guard let service = fields.string(.service), let account = fields.string(.account), fields.secret != nil,
                      accountRef(service: service, account: account) == ref
                else { throw TokenStoreError(.integrityCheckFailed, "A pending revocation is missing fields or misplaced.") }
                let newRef = accountRef(service: service, account: account, under: next)
                try db.run(
                    "INSERT OR REPLACE INTO rotation_pending(entry_id, old_sealed, account_ref, sealed) VALUES (?, ?, ?, ?)",
                    [.blob(rowKey), .blob(sealed), .blob(newRef), .blob(seal(fields, .pendingRevocation, rowKey: rowKey, under: next))])
                try mapRef(db, domain: 2, from: ref, to: newRef)
            case .states:
                let fields = try open(sealed, keyID: keyID, kind: .credentialUser, rowKey: rowKey)
                guard let userID = fields.string(.userID), userRef(userID) == rowKey else {
                    throw TokenStoreError(.integrityCheckFailed, "A credential-state row does not belong where it is.")
                }
                let newRef = userRef(userID, under: next)
                try db.run(
                    "INSERT OR REPLACE INTO rotation_states(old_user_ref, old_sealed, user_ref, sealed_user) VALUES (?, ?, ?, ?)",
                    [.blob(rowKey), .blob(sealed), .blob(newRef), .blob(seal(fields, .credentialUser, rowKey: newRef, under: next))])
                try mapRef(db, domain: 3, from: rowKey, to: newRef)
            }
        }
        return (rows.count, rows.last?.0)
    }

    private func mapRef(_ db: Database, domain: Int64, from old: [UInt8], to new: [UInt8]) throws {
        try db.run("INSERT OR IGNORE INTO rotation_refs(domain, old_ref, new_ref) VALUES (?, ?, ?)", [.int(domain), .blob(old), .blob(new)])
    }

    private func seal(_ fields: RecordFields, _ kind: RecordKind, rowKey: [UInt8], under key: DataKey) -> [UInt8] {
        fields.encode().withUnsafeBytes { Sealer.seal($0, key: key, binding: binding(kind, rowKey: rowKey, key: key)) }
    }

    /// Step 3, one transaction: re-seals what changed since its batch, swaps every re-sealed
    /// row in, and makes `next` the active key. Returns the rows re-sealed here.
    private func switchKeys(to next: DataKey) throws -> Int {
        try withDatabase { db in
            let resealed = try db.writeTransaction { () throws -> Int in
                try followKeyRotation(db)
                var resealed = 0
                for table in ResealTable.allCases {
                    resealed += try resealStale(db, table, to: next, after: [], limit: Int(Int32.max)).0
                }
                let old: [SQLValue] = [.blob(dataKey.keyID)]
                let new: SQLValue = .blob(next.keyID)
                func count(_ sql: String) throws -> Int { Int(try db.scalarInt(sql) ?? 0) }
                func mismatch(_ what: String) -> TokenStoreError {
                    TokenStoreError(.integrityCheckFailed, "The key switch found \(what) rows without a re-sealed copy; nothing was switched.")
                }

                let items = try count("SELECT count(*) FROM items")
                try db.run(
                    """
                    INSERT INTO items(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
                    SELECT r.lookup, r.account_ref, i.kind, ?, r.sealed, i.created_at, i.updated_at
                    FROM items i JOIN rotation_items r ON r.old_lookup = i.lookup AND r.old_sealed = i.sealed
                    WHERE i.key_id = ?
                    """, [new] + old)
                guard db.changes == items else { throw mismatch("item") }
                try db.run("DELETE FROM items WHERE key_id = ?", old)

                let pending = try count("SELECT count(*) FROM pending_revocations")
                try db.run(
                    """
                    UPDATE pending_revocations SET key_id = ?, sealed = r.sealed, account_ref = r.account_ref
                    FROM rotation_pending r
                    WHERE r.entry_id = pending_revocations.entry_id AND r.old_sealed = pending_revocations.sealed
                      AND pending_revocations.key_id = ?
                    """, [new] + old)
                guard db.changes == pending else { throw mismatch("pending-revocation") }

                let states = try count("SELECT count(*) FROM credential_states")
                try db.run(
                    """
                    INSERT INTO credential_states(user_ref, key_id, sealed_user, state, updated_at)
                    SELECT r.user_ref, ?, r.sealed_user, s.state, s.updated_at
                    FROM credential_states s JOIN rotation_states r ON r.old_user_ref = s.user_ref AND r.old_sealed = s.sealed_user
                    WHERE s.key_id = ?
                    """, [new] + old)
                guard db.changes == states else { throw mismatch("credential-state") }
                try db.run("DELETE FROM credential_states WHERE key_id = ?", old)

                try db.run(
                    """
                    UPDATE credential_history SET user_ref = m.new_ref FROM rotation_refs m
                    WHERE m.domain = 3 AND m.old_ref = credential_history.user_ref
                    """)
                let marks = try count("SELECT count(*) FROM account_marks")
                try db.run(
                    """
                    INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry)
                    SELECT m.new_ref, a.logging_out, a.updated_at, a.logout_entry
                    FROM account_marks a JOIN rotation_refs m ON m.domain = 2 AND m.old_ref = a.account_ref
                    """)
                let kept = db.changes
                try db.run("DELETE FROM account_marks WHERE account_ref NOT IN (SELECT new_ref FROM rotation_refs WHERE domain = 2)")
                if kept < marks {
                    logger.info("dropped logout marks of accounts with nothing left", metadata: ["marks": "\(marks - kept)"])
                }

                try db.run("UPDATE data_keys SET status = 'retired' WHERE key_id = ? AND status = 'active'", old)
                try db.run("UPDATE data_keys SET status = 'active' WHERE key_id = ? AND status = 'next'", [new])
                guard db.changes == 1 else {
                    throw TokenStoreError(.ioError, "The new data key's record disappeared during the switch; nothing was switched.")
                }
                for table in Self.rotationTables { try db.run("DELETE FROM \(table)") }
                // The key that sealed whatever was logged out is retired: no erase is owed.
                try db.run("UPDATE store_info SET erase_owed_since = NULL WHERE id = 1")
                return resealed
            }
            replaceDataKey(next)
            return resealed
        }
    }

    /// Step 4: deletes retired keys from the key provider, then their records.
    private func deleteRetiredKeys() throws {
        let retired: [[UInt8]] = try read { db in
            var ids: [[UInt8]] = []
            try db.forEachRow("SELECT key_id FROM data_keys WHERE status = 'retired'") { ids.append($0.blob(0)) }
            return ids
        }
        for keyID in retired {
            try keyProvider.deleteKey(reference(keyID))
            CrashPoint.reach("rotate.afterOldKeyDeleted")
            try write { db in try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'retired'", [.blob(keyID)]) }
        }
    }

    // MARK: Files

    /// The store id and every recorded key id of the database at `path`, read without keys.
    private static func recordedKeys(path: String) throws -> ([UInt8]?, [[UInt8]]) {
        let db = try Database(path: path)
        let tables = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('store_info', 'data_keys')") ?? 0
        guard tables == 2 else { return (nil, []) }
        let storeID = try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", []) { $0.blob(0) }
        var keyIDs: [[UInt8]] = []
        try db.forEachRow("SELECT key_id FROM data_keys") { keyIDs.append($0.blob(0)) }
        return (storeID, keyIDs)
    }

    /// fsyncs the directory holding `path`, so deletions and renames are durable.
    static func syncDirectory(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = Glibc.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            Glibc.close(fd)
        }
    }
}

/// The advisory lock that lets one rotation run at a time: `flock` on
/// `<database>-keyrotation.lock`, released by closing (also when the process dies).
final class RotationLock {
    static let suffix = "-keyrotation.lock"
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }
    deinit { Glibc.close(fd) }

    /// The lock, or nil when another store object or process holds it.
    static func acquire(storePath: String) throws -> RotationLock? {
        let path = storePath + suffix
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == ELOOP {
                throw TokenStoreError(.unsafeFileLayout, "The rotation lock file is a symbolic link; refusing to open it.")
            }
            throw TokenStoreError(.ioError, "Could not open the rotation lock file.", cause: .posix(errno: errno, operation: "open"))
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
            Glibc.close(fd)
            throw TokenStoreError(.unsafeFileLayout, "The rotation lock file is not a regular file of this user.")
        }
        if info.st_mode & 0o777 != 0o600 { _ = fchmod(fd, 0o600) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            Glibc.close(fd)
            if error == EWOULDBLOCK { return nil }
            throw TokenStoreError(.ioError, "Could not take the rotation lock.", cause: .posix(errno: error, operation: "flock"))
        }
        return RotationLock(fd: fd)
    }
}
