import FoundationEssentials

/// What a write transaction owes once it has removed a session's secrets (a refresh token leaving
/// the outbox, an account's local entries deleted): a WAL checkpoint after the commit, so the
/// deleted ciphertext does not linger in the -wal file, and, when nothing secret is left, a
/// crypto-erase recorded as owed (see ``TokenStore/performOwedMaintenance()``).
///
/// The record layer reports the removal where it makes it (``Database/noteSecretsRemoved()``);
/// the transaction's owner (``StoreConnection``) pays both duties once, before and after the
/// commit, as it raises the epoch for an ``EpochRaisingChange``. A new logout-like transaction
/// owes them by removing secrets through these records, not by remembering call sites.
final class SecretRemovalObserver: TransactionObserver {
    fileprivate(set) var removed = false

    func databaseWillCommit(_ db: Database) throws {}
}

extension Database {
    /// Inside a write transaction: the record change being made removed secret rows.
    func noteSecretsRemoved() {
        precondition(isInTransaction, "a secret removal noted outside a transaction")
        transactionObserver(SecretRemovalObserver.init).removed = true
    }

    /// Whether a record change of the write transaction running now removed secret rows.
    var removedSecrets: Bool { attachedObserver(SecretRemovalObserver.self)?.removed ?? false }
}

/// An account's session entries as one record-level group, the way a logout removes them.
enum AccountEntries {
    /// Deletes `account`'s local entries (Apple user id, access-token cache, ID token, profile,
    /// any refresh token), its logout mark and its DPoP binding. When a secret row went, the
    /// removal is reported (``Database/noteSecretsRemoved()``) and so is the epoch raise it needs
    /// (``EpochRaisingChange/localEntriesDeleted``: an older copy would bring the entries back;
    /// a caller finishing a logout whose first step raised the epoch covers it with
    /// ``Database/coveringEpochRaise(_:)``).
    /// - Returns: whether any secret row was deleted.
    @discardableResult
    static func deleteLocal(_ db: Database, _ account: AccountID, envelope: Envelope) throws -> Bool {
        var deleted = false
        for kind in ItemKind.session {
            if try ItemRecord.delete(db, ItemKey(account: account, kind: kind), envelope: envelope) { deleted = true }
        }
        if try AccessTokenRecord.deleteAll(db, of: account, envelope: envelope) { deleted = true }
        try AccountMarks.clear(db, account, envelope: envelope)
        try DPoPStateRecord.delete(db, .binding(account), envelope: envelope)
        if deleted {
            db.noteSecretsRemoved()
            db.requireEpochRaise(.localEntriesDeleted)
        }
        return deleted
    }
}

/// The store's crypto-erase owed mark (`store_info.erase_owed_since`).
enum EraseOwed {
    /// In a transaction that removed secrets: when the store's options ask for a new key after the
    /// last logout and nothing secret is left (``Outbox/maintenanceOwed(holdsSecrets:rotatesKeyAfterLastLogout:)``),
    /// records that a crypto-erase is owed (the first time only; ``KeyRotation`` clears it).
    static func markIfEmpty(_ db: Database, rotatesKeyAfterLastLogout: Bool) throws {
        // The tables are counted only when the answer can be yes.
        guard rotatesKeyAfterLastLogout,
            Outbox.maintenanceOwed(
                holdsSecrets: !(try SealedTables.holdNoSecrets(db)), rotatesKeyAfterLastLogout: rotatesKeyAfterLastLogout) == .cryptoErase
        else { return }
        try db.run(
            "UPDATE store_info SET erase_owed_since = coalesce(erase_owed_since, ?) WHERE id = 1", [.int(Timestamp.nowMillis())])
    }
}
