import FoundationEssentials

/// A data-key rotation of one store: a new key, every sealed row re-sealed under it, the
/// switch, then the old key deleted. The steps and why each is crash-safe are in the
/// "Key rotation" article of the documentation catalogue; in short:
/// 1. ``beginNewKey()`` records the new key as `next`, then stores it in the key provider;
/// 2. batches re-seal the rows of every ``SealedTables/all`` table into work tables, while
///    reads and writes go on under the active key;
/// 3. ``switchKeys(to:)`` re-seals what changed since, swaps the copies in and makes the new
///    key active, in one transaction;
/// 4. ``deleteRetiredKeys()`` removes the old key from the provider, then its record.
/// The caller holds the ``RotationLock``.
struct KeyRotation {
    let connection: StoreConnection
    private var logger: TokenStoreLogger { connection.logger }

    /// Runs (or resumes) a rotation. With `startNew` false only an interrupted one is
    /// finished; returns nil when there was none.
    func run(batchSize: Int, progress: ((Int, Int) -> Void)?, startNew: Bool) throws -> KeyRotationReport? {
        try deleteRetiredKeys()
        var resumed = false
        var next: DataKey?
        if let nextID = try connection.read({ db, _ in
            try db.firstRow("SELECT key_id FROM data_keys WHERE status = 'next'", [], { $0.blob(0) })
        }) {
            do {
                next = try connection.read { db, _ in try connection.loadKey(db, keyID: nextID, filedUnderItsID: true) }
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
            let providerKeepsKey = try KeySlotRotation(connection: connection).plan()
            next = try beginNewKey(providerKeepsKey: providerKeepsKey)
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

    /// Step 1: records the new key as `next`, then stores it in the key provider (when the
    /// provider keeps the data key itself: `providerKeepsKey`, see ``KeySlotRotation/plan()``),
    /// then gives the key slots their new key pairs. A crash in between leaves a record without
    /// a key, which the next run rolls back. (A store whose slots all have boxes keeps the new
    /// key in memory only until the switch: a crash before it rolls the rotation back.)
    private func beginNewKey(providerKeepsKey: Bool) throws -> DataKey {
        let key = try DataKey.generate(scheme: connection.newKeyScheme)
        try connection.write { db, envelope in
            for table in try SealedTables.existing(SealedTables.rotationTables, in: db) { try db.run("DELETE FROM \(table)") }
            try db.run(
                "INSERT INTO data_keys(key_id, status, key_check, created_at, scheme) VALUES (?, 'next', ?, ?, ?)",
                [.blob(key.keyID), .blob(KeyCheck.seal(storeID: envelope.storeID, key: key)),
                 .int(Timestamp.nowMillis()), .int(key.scheme.rawValue)])
        }
        do {
            if providerKeepsKey { try connection.keyProvider.storeKey(key.material, for: connection.reference(key.keyID)) }
        } catch let error as TokenStoreError where error.code == .timedOut {
            // The Secret Service may still store it after we stopped waiting. Keep the record:
            // the next run resumes with the key if it arrived, or rolls back (deleting the key
            // item) if not, so no key item is left that the store does not know of.
            throw error
        } catch {
            do {
                try connection.write { db, _ in
                    try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'next'", [.blob(key.keyID)])
                }
            } catch {
                logger.info(
                    "could not remove the record of a key that was not stored; the next open does",
                    metadata: ["error": TokenStoreError.code(of: error)])
            }
            throw error
        }
        do {
            let kept = try KeySlotRotation(connection: connection).fileNewSlotKeys()
            if !kept.isEmpty {
                logger.info("key slots keep their key pairs (only their user can reach them)", metadata: ["slots": kept.map(String.init).joined(separator: ",")])
            }
        } catch {
            do { try rollBack(key.keyID) } catch {
                logger.info("could not roll back a key rotation whose slot keys failed; the next open does", metadata: ["error": TokenStoreError.code(of: error)])
            }
            throw error
        }
        CrashPoint.reach("rotate.afterNewKey")
        return key
    }

    /// Undoes an unfinished rotation: the new key leaves the provider first, then its record
    /// and the work tables (a crash in between is rolled back again).
    private func rollBack(_ nextID: [UInt8]) throws {
        try connection.keyProvider.deleteKey(connection.reference(nextID))
        try KeySlotRotation(connection: connection).rollBack()
        try connection.write { db, _ in
            for table in try SealedTables.existing(SealedTables.rotationTables, in: db) { try db.run("DELETE FROM \(table)") }
            try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'next'", [.blob(nextID)])
        }
    }

    /// Steps 2–4.
    private func reseal(to key: DataKey, batchSize: Int, progress: ((Int, Int) -> Void)?, resumed: Bool) throws
        -> KeyRotationReport
    {
        let (total, alreadyDone, previous) = try connection.read { db, envelope in
            (try SealedTables.rowCount(db), try SealedTables.all.reduce(0) { $0 + (try $1.rotationCopies(db)) }, envelope.keyID)
        }
        var done = min(alreadyDone, total)
        var resealed = 0
        var batches = 0
        progress?(done, total)
        for table in SealedTables.all {
            var cursor: [UInt8] = []
            while true {
                let (count, last) = try connection.write { db, envelope in
                    try table.resealStale(db, from: envelope, to: Envelope(storeID: envelope.storeID, key: key), after: cursor, limit: batchSize)
                }
                guard count > 0, let last else { break }
                cursor = last
                done = min(done + count, total)
                resealed += count
                batches += 1
                progress?(done, total)
                CrashPoint.reach("rotate.afterBatch")
            }
        }
        resealed += try switchKeys(to: key)
        CrashPoint.reach("rotate.afterSwitch")
        try deleteRetiredKeys()
        connection.checkpointQuietly()
        let finalTotal = max(total, done)
        progress?(finalTotal, finalTotal)
        return KeyRotationReport(
            previousKeyIdentifier: Hex.encode(previous), newKeyIdentifier: Hex.encode(key.keyID),
            rowsResealed: resealed, batches: batches, resumed: resumed)
    }

    /// Step 3, one transaction: re-seals what changed since its batch, swaps every re-sealed
    /// row in, and makes `key` the active key. Returns the rows re-sealed here.
    private func switchKeys(to key: DataKey) throws -> Int {
        try connection.write(switchingTo: key) { db, current in
            let next = Envelope(storeID: current.storeID, key: key)
            var resealed = 0
            for table in SealedTables.all {
                resealed += try table.resealStale(db, from: current, to: next, after: [], limit: Int(Int32.max)).count
            }
            for table in SealedTables.all { try table.switchIn(db, from: current, to: next) }
            let dropped = try AccountMarks.switchIn(db, from: current, to: next)
            if dropped > 0 {
                logger.info("dropped logout marks of accounts with nothing left", metadata: ["marks": "\(dropped)"])
            }
            try db.run("UPDATE data_keys SET status = 'retired' WHERE key_id = ? AND status = 'active'", [.blob(current.keyID)])
            try db.run("UPDATE data_keys SET status = 'active' WHERE key_id = ? AND status = 'next'", [.blob(key.keyID)])
            guard db.changes == 1 else {
                throw TokenStoreError(.ioError, "The new data key's record disappeared during the switch; nothing was switched.")
            }
            for table in try SealedTables.existing(SealedTables.rotationTables, in: db) { try db.run("DELETE FROM \(table)") }
            // A copy of the file from before the switch is an older copy now (raised under `next`).
            db.requireEpochRaise(.keySwitched)
            try KeyProviderRecord.rewrite(db, from: current, to: next)
            try AccessPolicyRecord.rewrite(db, from: current, to: next)
            try KeySlotRotation.switchIn(db, from: current, to: next, openKind: connection.keyProvider.kind)
            // The key that sealed whatever was logged out is retired: no erase is owed.
            try db.run("UPDATE store_info SET erase_owed_since = NULL WHERE id = 1")
            return resealed
        }
    }

    /// Step 4: deletes retired keys from the key provider, then their records.
    private func deleteRetiredKeys() throws {
        let retired: [[UInt8]] = try connection.read { db, _ in
            var ids: [[UInt8]] = []
            try db.forEachRow("SELECT key_id FROM data_keys WHERE status = 'retired'") { ids.append($0.blob(0)) }
            return ids
        }
        for keyID in retired {
            try connection.keyProvider.deleteKey(connection.reference(keyID))
            CrashPoint.reach("rotate.afterOldKeyDeleted")
            try connection.write { db, _ in
                try db.run("DELETE FROM data_keys WHERE key_id = ? AND status = 'retired'", [.blob(keyID)])
            }
        }
        KeySlotRotation(connection: connection).deleteRetired()
    }
}
