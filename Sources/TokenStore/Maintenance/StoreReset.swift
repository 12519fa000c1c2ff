import FoundationEssentials

/// The explicit confirmation ``TokenStore/resetStore(path:appID:keyProvider:confirm:)`` requires.
public enum StoreResetConfirmation: Sendable {
    /// Destroy every sealed row (secrets, pending revocations, keys); keep the history.
    case yesDiscardSealedData
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
    /// Of those, the keys left in the key provider because they still open the store's key
    /// check or rows (the store's key metadata was damaged, not its key): a backup of the
    /// database file still opens with them. Empty after a real key loss.
    public let keptKeyIdentifiers: [String]
    /// The new data key (hex id).
    public let newKeyIdentifier: String
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
    /// Starts over after the data key was lost (`dataKeyMissing`), keeping the credential
    /// history: every sealed row is destroyed, the states are recorded `revoked` (`keyLost`)
    /// and a fresh key is made. Works on the file, since the store cannot be opened while its
    /// key is missing. See <doc:StoreReset> for what survives and how to read it.
    /// A key item the store names that is still in the key provider and still opens the store
    /// is never deleted (see ``StoreResetReport/keptKeyIdentifiers``): when only the database's
    /// key records were damaged, restoring the file from a backup is the better remedy, and the
    /// key it needs stays. The reset store takes the key provider's epoch (see <doc:StoreEpoch>):
    /// a reset revokes nothing, so a copy as new as the last logout (such as that backup) still
    /// opens, and an older one is still `storeRolledBack`.
    /// - Warning: every secret is gone for good, and refresh tokens that were waiting to be
    ///   revoked stay valid at the server until they expire.
    /// - Throws: `keyringLocked`, `secretServiceUnavailable`, `timedOut` (the database is
    ///   unchanged; the Secret Service may still carry out a request it had received),
    ///   `wrongKeyProvider` (the store records another kind of key provider: nothing is changed),
    ///   `invalidInput`, `unsafeFileLayout`, `databaseCorrupt`, `databaseBusy`, `schemaTooNew`, `ioError`.
    ///
    /// A store with key slots of other kinds (a recovery key, a passphrase, another provider: see
    /// ``keySlots``) is not reset (`wrongKeyProvider`, nothing changed): one of them may still
    /// open it. ``resetStore(path:appID:keyProvider:confirm:despiteOtherKeySlots:)`` resets it anyway.
    @discardableResult
    public static func resetStore(
        path: String, appID: String, keyProvider: (any KeyProvider)? = nil,
        confirm: StoreResetConfirmation
    ) throws -> StoreResetReport {
        try resetStore(path: path, appID: appID, keyProvider: keyProvider, confirm: confirm, despiteOtherKeySlots: false)
    }

    /// As ``resetStore(path:appID:keyProvider:confirm:)``; with `despiteOtherKeySlots` true also a
    /// store whose other key slots may still open it.
    @discardableResult
    public static func resetStore(
        path: String, appID: String, keyProvider: (any KeyProvider)?,
        confirm: StoreResetConfirmation, despiteOtherKeySlots: Bool
    ) throws -> StoreResetReport {
        try validateAppID(appID)
        switch confirm { case .yesDiscardSealedData: break }
        let keyProvider = keyProvider ?? KeyProviderSelection.automatic(storePath: path)
        // Another program's database is refused before anything is made, changed or migrated.
        if try FileLayout.judge(databasePath: path) == .nonEmpty { try StoreIdentity.check(path: path) }
        try FileLayout.prepare(databasePath: path)
        var counts = (items: 0, states: 0, outbox: 0)
        var discarded: [String] = []
        var kept: [String] = []
        do {
            let db = try Database(path: path)
            // Version 10 needs the key (RowMACBackfill): the open after the reset applies it.
            _ = try Migrator().migrate(db, upTo: RowMACBackfill.version - 1)
            // A store whose key another provider holds is not reset: its data is intact.
            try KeyProviderRecord.refuseOtherProvider(db, provider: keyProvider)
            if !despiteOtherKeySlots { try KeySlotOpening.refuseReset(db, provider: keyProvider) }
            let storeID = try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", []) { $0.blob(0) }
            var keyIDs: [[UInt8]] = []
            try db.forEachRow("SELECT key_id FROM data_keys") { keyIDs.append($0.blob(0)) }
            if let storeID {
                for keyID in keyIDs {
                    let reference = DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
                    if let material = try keyProvider.loadKey(reference), material.count == DataKey.byteCount,
                        try KeyCheck.keyStillOpensStore(database: db, storeID: storeID, keyID: keyID, material: material)
                    {
                        kept.append(Hex.encode(keyID))
                        continue
                    }
                    try keyProvider.deleteKey(reference)
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
                let items = try ItemRecord.count(db)
                // The key slots go with the key they led to (their MACs are under it).
                let tables = SealedTables.all.map({ $0.table }) + ["account_marks", "data_keys", "key_slots", "key_slot_set"]
                    + SealedTables.rotationTables
                for table in try SealedTables.existing(tables, in: db) {
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
            discardedKeyIdentifiers: discarded, keptKeyIdentifiers: kept, newKeyIdentifier: store.keyIdentifier)
    }

    /// The credential history recorded before the store was reset (see
    /// ``resetStore(path:appID:keyProvider:confirm:)``), oldest first. These entries cannot
    /// be found by user id any more; entries of one user share a ``CredentialHistoryFromBeforeReset/subject``.
    /// Empty when the store was never reset.
    public func credentialHistoryFromBeforeReset() throws -> [CredentialHistoryFromBeforeReset] {
        try connection.read { db, _ in
            guard let last = try db.scalarInt("SELECT max(last_history_id) FROM store_resets") else { return [] }
            var entries: [CredentialHistoryFromBeforeReset] = []
            try db.forEachRow(
                "SELECT user_ref, at, from_state, to_state, reason, detail FROM credential_history WHERE id <= ? ORDER BY id",
                [.int(last)]
            ) { row in
                entries.append(CredentialHistoryFromBeforeReset(
                    subject: Hex.encode(Array(row.blob(0).prefix(8))),
                    transition: CredentialRecord.transition(row, from: 1)))
            }
            return entries
        }
    }
}
