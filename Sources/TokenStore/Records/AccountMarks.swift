import Foundation

/// `account_marks`: which accounts have a logout under way, and the outbox entry whose
/// revocation finishes it. Filed under the account's keyed hash; nothing sealed.
enum AccountMarks {
    static func isLoggingOut(_ db: Database, _ account: AccountID, envelope: Envelope) throws -> Bool {
        (try db.scalarInt(
            "SELECT logging_out FROM account_marks WHERE account_ref = ?",
            [.blob(envelope.accountRef(account))]) ?? 0) != 0
    }

    /// Marks the account as logging out, finished by the revocation of outbox entry `entryID`.
    static func markLoggingOut(_ db: Database, _ account: AccountID, entryID: [UInt8], envelope: Envelope) throws {
        try db.run(
            """
            INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry) VALUES (?, 1, ?, ?)
            ON CONFLICT(account_ref) DO UPDATE SET logging_out = 1, updated_at = excluded.updated_at,
                logout_entry = excluded.logout_entry
            """, [.blob(envelope.accountRef(account)), .int(Timestamp.nowMillis()), .blob(entryID)])
        // The logout relies on the mark: a write that did not take effect must not pass silently.
        guard db.changes == 1 else {
            throw TokenStoreError(.ioError, "The logout mark was not written; nothing was changed.")
        }
    }

    static func clear(_ db: Database, _ account: AccountID, envelope: Envelope) throws {
        try db.run(
            "DELETE FROM account_marks WHERE account_ref = ?", [.blob(envelope.accountRef(account))])
    }

    /// Whether settling outbox entry `entryID` finishes its account's logout: the account is
    /// marked as logging out and the mark is this entry's (or was written before marks named
    /// their entry). An older entry of the account settles only itself.
    static func settlesLogout(
        _ db: Database, entryID: [UInt8], _ account: AccountID, envelope: Envelope
    ) throws -> Bool {
        try db.firstRow(
            "SELECT logging_out, logout_entry FROM account_marks WHERE account_ref = ?",
            [.blob(envelope.accountRef(account))]
        ) { row in row.int(0) != 0 && (row.isNull(1) || row.blob(1) == entryID) } ?? false
    }

    /// In a key switch: refiles the marks under the accounts' hashes of the new key (mapped in
    /// `rotation_refs` by the re-sealed items and outbox entries); marks of accounts with
    /// nothing left are dropped. Returns how many were dropped.
    static func switchIn(_ db: Database) throws -> Int {
        let marks = Int(try db.scalarInt("SELECT count(*) FROM account_marks") ?? 0)
        let domain = SQLValue.int(Int64(LookupDomain.account.rawValue))
        try db.run(
            """
            INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry)
            SELECT m.new_ref, a.logging_out, a.updated_at, a.logout_entry
            FROM account_marks a JOIN rotation_refs m ON m.domain = ? AND m.old_ref = a.account_ref
            """, [domain])
        let kept = db.changes
        try db.run("DELETE FROM account_marks WHERE account_ref NOT IN (SELECT new_ref FROM rotation_refs WHERE domain = ?)", [domain])
        return marks - kept
    }
}
