import FoundationEssentials

/// `account_marks`: which accounts have a logout under way, and the outbox entry whose
/// revocation finishes it. Filed under the account's keyed hash; nothing sealed, but each row
/// carries a MAC over (table, account hash, logging out, entry).
///
/// A mark whose MAC does not match (edited without the key) or that has none (stripped; below
/// schema version 10 also a mark written before schema 7) is read in its fail-safe form: the account is logging out and any of its entries
/// finishes the logout. A tampered mark can then neither bring an account's cached tokens back
/// nor keep a logout from finishing; ``verifyRows(_:envelope:_:)`` reports it.
enum AccountMarks {
    static let table = "account_marks"

    /// What a mark says, as it may be acted on.
    struct Mark {
        let loggingOut: Bool
        /// The entry whose settling finishes the logout; nil: any entry of the account.
        let entry: [UInt8]?
        /// Whether the stored MAC matched (false for a legacy or tampered row).
        let authenticated: Bool
    }

    static func mac(ref: [UInt8], loggingOut: Bool, entry: [UInt8]?, envelope: Envelope) -> [UInt8] {
        envelope.mac(.logoutMarkMAC, [MACField.name(table), ref, MACField.int(loggingOut ? 1 : 0), MACField.blob(entry)])
    }

    /// Reads logging_out, logout_entry and mac from column `first` on, for the mark of `ref`.
    private static func mark(_ row: Row, from first: Int32, ref: [UInt8], envelope: Envelope) -> Mark {
        let loggingOut = row.int(first) != 0
        let entry = row.isNull(first + 1) ? nil : row.blob(first + 1)
        if !row.isNull(first + 2),
            MACField.equal(row.blob(first + 2), mac(ref: ref, loggingOut: loggingOut, entry: entry, envelope: envelope))
        {
            return Mark(loggingOut: loggingOut, entry: entry, authenticated: true)
        }
        return Mark(loggingOut: true, entry: nil, authenticated: false)
    }

    static func find(_ db: Database, ref: [UInt8], envelope: Envelope) throws -> Mark? {
        try db.firstRow(
            "SELECT logging_out, logout_entry, mac FROM account_marks WHERE account_ref = ?", [.blob(ref)]
        ) { mark($0, from: 0, ref: ref, envelope: envelope) }
    }

    static func isLoggingOut(_ db: Database, _ account: AccountID, envelope: Envelope) throws -> Bool {
        try find(db, ref: envelope.accountRef(account), envelope: envelope)?.loggingOut ?? false
    }

    /// Marks the account as logging out, finished by the revocation of outbox entry `entryID`.
    static func markLoggingOut(_ db: Database, _ account: AccountID, entryID: [UInt8], envelope: Envelope) throws {
        let ref = envelope.accountRef(account)
        try db.run(
            """
            INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry, mac) VALUES (?, 1, ?, ?, ?)
            ON CONFLICT(account_ref) DO UPDATE SET logging_out = 1, updated_at = excluded.updated_at,
                logout_entry = excluded.logout_entry, mac = excluded.mac
            """,
            [.blob(ref), .int(Timestamp.nowMillis()), .blob(entryID),
             .blob(mac(ref: ref, loggingOut: true, entry: entryID, envelope: envelope))])
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
    /// marked as logging out and the mark is this entry's (or names none: written before
    /// marks named their entry, or in its fail-safe form). An older entry of the account
    /// settles only itself.
    static func settlesLogout(
        _ db: Database, entryID: [UInt8], _ account: AccountID, envelope: Envelope
    ) throws -> Bool {
        try settlesLogout(db, entryID: entryID, ref: envelope.accountRef(account), envelope: envelope)
    }

    /// Whether `account` is marked logging out by entry `entryID` itself (not a legacy mark
    /// naming no entry): the mark ``SessionLedger/beginLogout(account:reason:)`` wrote in the
    /// transaction that queued the entry and raised the store epoch.
    static func isMarked(_ db: Database, by entryID: [UInt8], _ account: AccountID, envelope: Envelope) throws -> Bool {
        guard let mark = try find(db, ref: envelope.accountRef(account), envelope: envelope) else { return false }
        return mark.loggingOut && mark.entry == entryID
    }

    static func settlesLogout(_ db: Database, entryID: [UInt8], ref: [UInt8], envelope: Envelope) throws -> Bool {
        guard let mark = try find(db, ref: ref, envelope: envelope) else { return false }
        return mark.loggingOut && (mark.entry == nil || mark.entry == entryID)
    }

    /// Reports each mark whose MAC does not match or is missing (below schema version 10 a mark
    /// without one is legacy, read in its fail-safe form, and not reported).
    static func verifyRows(_ db: Database, envelope: Envelope, _ report: (String, String?) -> Void) throws {
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow("SELECT account_ref, logging_out, logout_entry, mac FROM account_marks") { row in
            let ref = row.blob(0)
            let legacy = row.isNull(3) && legacyAllowed
            let mark = mark(row, from: 1, ref: ref, envelope: envelope)
            report(
                Hex.encode(Array(ref.prefix(6))),
                mark.authenticated || legacy
                    ? nil
                    : row.isNull(3)
                        ? "integrityCheckFailed: A logout mark lost its MAC: it was changed outside this library."
                        : "integrityCheckFailed: A logout mark was altered: it does not match its MAC.")
        }
    }

    /// In a key switch: refiles the marks under the accounts' hashes of the new key (mapped in
    /// `rotation_refs` by the re-sealed items and outbox entries), with MACs under `next`; a
    /// mark that does not authenticate under `current` moves in its fail-safe form. Marks of
    /// accounts with nothing left are dropped. Returns how many were dropped.
    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws -> Int {
        var marks: [(ref: [UInt8], updatedAt: Int64, mark: Mark)] = []
        try db.forEachRow("SELECT account_ref, updated_at, logging_out, logout_entry, mac FROM account_marks") { row in
            let ref = row.blob(0)
            marks.append((ref, row.int(1), mark(row, from: 2, ref: ref, envelope: current)))
        }
        let domain = SQLValue.int(Int64(LookupDomain.account.rawValue))
        try db.run("DELETE FROM account_marks")
        var kept = 0
        for old in marks {
            guard let newRef = try db.firstRow(
                "SELECT new_ref FROM rotation_refs WHERE domain = ? AND old_ref = ?", [domain, .blob(old.ref)], { $0.blob(0) })
            else { continue }
            try db.run(
                "INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry, mac) VALUES (?, ?, ?, ?, ?)",
                [.blob(newRef), .int(old.mark.loggingOut ? 1 : 0), .int(old.updatedAt), old.mark.entry.map(SQLValue.blob) ?? .null,
                 .blob(mac(ref: newRef, loggingOut: old.mark.loggingOut, entry: old.mark.entry, envelope: next))])
            kept += 1
        }
        return marks.count - kept
    }
}
