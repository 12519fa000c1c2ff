import FoundationEssentials

extension CredentialStateDetail {
    /// Recorded when an outbox row that could not be opened was discarded by id: its token was
    /// never revoked, and its user is unknown (the entry is filed under its account's hash).
    public static let pendingRevocationUnreadable = "pendingRevocationUnreadable"
}

extension SessionLedger {
    /// The outbox as it is: the entries that open, and the rows that do not (each by id), so
    /// that one damaged row never keeps the others from being revoked.
    package func pendingRevocationList() throws -> PendingRevocationList {
        try connection.read { db, envelope in try OutboxRecord.listing(db, envelope: envelope) }
    }

    /// Gives up on an outbox row that does not open (tampered, damaged): it is deleted, its
    /// token never revoked.
    ///
    /// What can be recorded is recorded. The row's user id is sealed in it, so it is unknown;
    /// if the row was the entry that finishes its account's logout (the account's mark names
    /// it) and the account still holds its Apple user id, the logout is finished locally and
    /// that user recorded `revoked` with reason `revocationDiscarded` and detail
    /// `pendingRevocationUnreadable`. Otherwise a history entry with that reason and detail is
    /// filed under the row's account hash (it cannot be found by user id; `tokenctl verify`
    /// still checks it).
    /// - Returns: false when there is no such row.
    /// - Throws: `invalidInput` for a malformed id, or for a row that opens (discard it with
    ///   ``discardPendingRevocation(_:)``, which knows its user).
    /// - Warning: the refresh token may still be valid at the server.
    @discardableResult
    package func discardUnreadablePendingRevocation(id: String) throws -> Bool {
        let entryID = try OutboxRecord.entryID(hex: id)
        return try connection.write { db, envelope in
            guard let ref = try db.firstRow(
                "SELECT account_ref FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)], { $0.blob(0) })
            else { return false }
            guard try OutboxRecord.listing(db, where: "entry_id = ?", [.blob(entryID)], envelope: envelope).entries.isEmpty else {
                throw TokenStoreError(
                    .invalidInput, "This pending revocation opens: discard it as an entry, which records its user.")
            }
            try OutboxRecord.delete(db, entryID: entryID)
            let now = Timestamp.nowMillis()
            var recordedForUser = false
            if try AccountMarks.settlesLogout(db, entryID: entryID, ref: ref, envelope: envelope) {
                var owner: (account: AccountID, userID: String?)?
                try ItemRecord.forEach(db, kind: .appleUserID, envelope: envelope) { item in
                    if envelope.accountRef(item.key.account) == ref { owner = (item.key.account, item.secret.stringValue()) }
                }
                if let owner {
                    try AccountEntries.deleteLocal(db, owner.account, envelope: envelope)
                    if let userID = owner.userID {
                        try CredentialRecord.recordSignedOut(
                            db, userID: userID, leaving: owner.account, reason: .revocationDiscarded,
                            detail: CredentialStateDetail.pendingRevocationUnreadable, envelope: envelope)
                        recordedForUser = true
                    }
                } else {
                    try db.run("DELETE FROM account_marks WHERE account_ref = ?", [.blob(ref)])
                }
            }
            if !recordedForUser {
                try CredentialHistory.append(
                    db, ref: ref, at: now, from: CredentialState.revoked.rawValue, to: CredentialState.revoked.rawValue,
                    reason: CredentialStateReason.revocationDiscarded.rawValue,
                    detail: CredentialStateDetail.pendingRevocationUnreadable, envelope: envelope)
            }
            return true
        }
    }
}
