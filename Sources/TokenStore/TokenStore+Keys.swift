import FoundationEssentials

extension TokenStore {
    /// Makes a new data key, re-seals every row under it, switches the store to it, and only
    /// then deletes the old key from the key provider. Every step is crash-safe and an
    /// interrupted rotation is finished at the next open; see <doc:KeyRotation>.
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
            guard let report = try KeyRotation(connection: connection).run(batchSize: batchSize, progress: progress, startNew: true) else {
                throw TokenStoreError(.ioError, "The key rotation did not start.")
            }
            return report
        }
    }

    /// The data keys the store records (normally one, `active`), for diagnostics.
    /// - Throws: `storeClosed`, storage errors.
    public func dataKeys() throws -> [DataKeyInfo] {
        try connection.read { db, _ in
            var keys: [DataKeyInfo] = []
            try db.forEachRow("SELECT key_id, status, created_at FROM data_keys ORDER BY created_at, key_id") { row in
                keys.append(DataKeyInfo(
                    identifier: Hex.encode(row.blob(0)), status: DataKeyInfo.Status(rawValue: row.text(1)) ?? .retired,
                    createdAt: Timestamp.date(fromMillis: row.int(2))))
            }
            return keys
        }
    }

    /// Runs the maintenance the store owes, if any: finishes (or rolls back) a key rotation
    /// that a crash or a time-out interrupted, runs the crypto-erase owed since the last
    /// account was logged out (see ``Options/rotatesKeyAfterLastLogout``), and moves a store
    /// whose data key is used the pre-version-8 way (the key itself sealing) to a new key whose
    /// subkeys seal, look up, fingerprint and authenticate (a rotation). Every open runs it;
    /// the session layer runs it after a logout, outside its logout transactions. Skipped
    /// (nil) when another process is rotating the key.
    ///
    /// It may take a while: a rotation re-seals every row and talks to the key provider.
    /// - Returns: the rotation it ran, or nil when nothing was owed.
    /// - Throws: as ``rotateDataKey(batchSize:progress:)``; the store stays usable (every row
    ///   readable) and the maintenance stays owed.
    @discardableResult
    public func performOwedMaintenance() throws -> KeyRotationReport? {
        let (unfinished, owed, upgradable) = try connection.withDatabase { db in
            (try db.scalarInt("SELECT count(*) FROM data_keys WHERE status != 'active'") ?? 0,
             try db.scalarInt("SELECT count(*) FROM store_info WHERE erase_owed_since IS NOT NULL") ?? 0,
             try KeyCheck.hasSchemeColumn(db))
        }
        let eraseOwed = owed > 0 && options.rotatesKeyAfterLastLogout
        let schemeOwed = upgradable && (connection.activeEnvelope?.key.scheme ?? connection.newKeyScheme) < connection.newKeyScheme
        guard unfinished > 0 || eraseOwed || schemeOwed else { return nil }
        guard let lock = try RotationLock.acquire(storePath: path) else { return nil }
        return try withExtendedLifetime(lock) {
            let report = try KeyRotation(connection: connection).run(batchSize: 500, progress: nil, startNew: eraseOwed || schemeOwed)
            if let report {
                let what =
                    eraseOwed ? "ran the crypto-erase owed since the last logout"
                    : schemeOwed ? "moved the store to a data key with separate subkeys" : "finished an interrupted key rotation"
                logger.info("\(what)", metadata: ["rows": "\(report.rowsResealed)"])
            }
            return report
        }
    }
}
