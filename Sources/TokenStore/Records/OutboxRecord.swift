import FoundationEssentials

/// A row of `pending_revocations`: a refresh token waiting to be revoked at the authorization
/// server, sealed with its account's names, the Apple user id and the logout reason, filed
/// under a random entry id and the keyed hash of its account (`account_ref`).
///
/// The schedule lives in clear columns (attempts, next attempt, last error, failure flag):
/// a MAC over them and the entry id (``OutboxSchedule``) makes an edit without the key a bad
/// row. A row without a MAC is tampering from schema version 10 on (the open that applies it
/// gives every older row its MAC, ``RowMACBackfill``); below it, such a row (written before
/// schema 7) is read with a neutral schedule, due at once.
enum OutboxRecord: SealedTable {
    static let table = "pending_revocations"
    static let holdsSecrets = true
    static let rotationTable = "rotation_pending"
    static let columns =
        "entry_id, key_id, sealed, attempts, next_attempt_at, last_error, failed_code, created_at, account_ref, mac"

    /// Opens one row of ``columns`` (the entry) and checks it belongs where it is and that its
    /// schedule is the one written with the key.
    private static func open(
        _ row: Row, envelope: Envelope, now: Int64, legacyAllowed: Bool
    ) throws -> (entry: PendingRevocation, fields: RecordFields) {
        let entryID = row.blob(0)
        let fields = try envelope.open(row, sealed: 2, keyID: 1, kind: .pendingRevocation, rowKey: entryID)
        guard let service = fields.string(.service), let name = fields.string(.account), let token = fields.secret,
            case let account = AccountID(name, service: service), envelope.accountRef(account) == row.blob(8)
        else { throw TokenStoreError(.integrityCheckFailed, "A pending revocation is missing fields or misplaced.") }
        let schedule = try OutboxSchedule(row, from: 3, macColumn: 9).checked(
            entryID: entryID, envelope: envelope, now: now, legacyAllowed: legacyAllowed)
        let entry = PendingRevocation(
            id: Hex.encode(entryID), account: account, appleUserID: fields.string(.appleUserID),
            refreshToken: token, reason: CredentialStateReason(rawValue: fields.string(.label) ?? "userLogout"),
            endpoints: ServerEndpoints(fields), attempts: Int(schedule.attempts), nextAttemptAt: Timestamp.date(fromMillis: schedule.nextAttemptAt),
            lastError: schedule.lastError, failureCode: schedule.failedCode,
            createdAt: Timestamp.date(fromMillis: schedule.createdAt))
        return (entry, fields)
    }

    /// The entries matching `whereSQL` (with bound `arguments`), oldest first, and the rows
    /// that did not open (tampered, damaged, another key): one bad row never hides the others.
    static func listing(_ db: Database, where whereSQL: String = "1", _ arguments: [SQLValue] = [], envelope: Envelope)
        throws -> PendingRevocationList
    {
        var list = PendingRevocationList(entries: [], unreadable: [])
        let now = Timestamp.nowMillis()
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow(
            "SELECT \(columns) FROM pending_revocations WHERE \(whereSQL) ORDER BY created_at, entry_id", arguments
        ) { row in
            do {
                list.entries.append(try open(row, envelope: envelope, now: now, legacyAllowed: legacyAllowed).entry)
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                list.unreadable.append(UnreadablePendingRevocation(
                    id: Hex.encode(row.blob(0)), reason: error.message, createdAt: Timestamp.date(fromMillis: row.int(7))))
            }
        }
        return list
    }

    /// The entries matching `whereSQL`, oldest first.
    /// - Throws: `integrityCheckFailed` on the first row that does not open.
    static func entries(_ db: Database, where whereSQL: String = "1", _ arguments: [SQLValue] = [], envelope: Envelope)
        throws -> [PendingRevocation]
    {
        var entries: [PendingRevocation] = []
        let now = Timestamp.nowMillis()
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow(
            "SELECT \(columns) FROM pending_revocations WHERE \(whereSQL) ORDER BY created_at, entry_id", arguments
        ) { entries.append(try open($0, envelope: envelope, now: now, legacyAllowed: legacyAllowed).entry) }
        return entries
    }

    /// The entries of one account that open, oldest first (a bad row is left to ``listing(_:where:_:envelope:)``).
    static func entries(_ db: Database, of account: AccountID, envelope: Envelope) throws -> [PendingRevocation] {
        try listing(db, where: "account_ref = ?", [.blob(envelope.accountRef(account))], envelope: envelope)
            .entries.filter { $0.account == account }
    }

    /// Queues `token` in the outbox, with the `endpoints` it is bound to; returns the new entry's
    /// id. The transaction raises the store epoch (a copy of the file from before it lacks the
    /// entry: the token would never be revoked).
    @discardableResult
    static func insert(
        _ db: Database, _ account: AccountID, appleUserID: String?, token: SecretBytes,
        reason: CredentialStateReason, endpoints: ServerEndpoints?, envelope: Envelope
    ) throws -> [UInt8] {
        let entryID = SecretBytes.random(count: 16).copyBytes()
        var fields = RecordFields()
        fields.set(.service, account.service)
        fields.set(.account, account.name)
        if let appleUserID { fields.set(.appleUserID, appleUserID) }
        fields.set(.label, reason.rawValue)
        endpoints?.add(to: &fields)
        fields.setSecret(token)
        let now = Timestamp.nowMillis()
        let schedule = OutboxSchedule(attempts: 0, nextAttemptAt: now, lastError: nil, failedCode: nil, createdAt: now)
        try db.run(
            """
            INSERT INTO pending_revocations(entry_id, account_ref, key_id, sealed, attempts, next_attempt_at, created_at, mac)
            VALUES (?, ?, ?, ?, 0, ?, ?, ?)
            """,
            [.blob(entryID), .blob(envelope.accountRef(account)), .blob(envelope.keyID),
             .blob(envelope.seal(fields, kind: .pendingRevocation, rowKey: entryID)), .int(now), .int(now),
             .blob(schedule.mac(entryID: entryID, envelope: envelope))])
        db.requireEpochRaise(.outboxEntryQueued)
        return entryID
    }

    /// Changes an entry's schedule: the stored one is checked against its MAC first, and the
    /// new one written with a MAC. Returns false when there is no such entry.
    /// - Throws: `integrityCheckFailed` when the stored schedule was altered.
    @discardableResult
    static func updateSchedule(
        _ db: Database, entryID: [UInt8], envelope: Envelope, _ change: (inout OutboxSchedule) -> Void
    ) throws -> Bool {
        guard var schedule = try db.firstRow(
            "SELECT attempts, next_attempt_at, last_error, failed_code, created_at, mac FROM pending_revocations WHERE entry_id = ?",
            [.blob(entryID)], { OutboxSchedule($0, from: 0, macColumn: 5) })
        else { return false }
        schedule = try schedule.checked(
            entryID: entryID, envelope: envelope, now: Timestamp.nowMillis(), legacyAllowed: try RowMACBackfill.legacyAllowed(db))
        change(&schedule)
        try schedule.write(db, entryID: entryID, envelope: envelope)
        return true
    }

    /// The 16-byte id of an entry, from its hex form.
    static func entryID(_ entry: PendingRevocation) throws -> [UInt8] {
        try entryID(hex: entry.id)
    }

    static func entryID(hex: String) throws -> [UInt8] {
        guard let entryID = Hex.decode(hex), entryID.count == 16 else {
            throw TokenStoreError(.invalidInput, "Not a pending-revocation id.")
        }
        return entryID
    }

    static func exists(_ db: Database, entryID: [UInt8]) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)]) ?? 0) > 0
    }

    /// Deletes an entry; returns whether there was one.
    @discardableResult
    static func delete(_ db: Database, entryID: [UInt8]) throws -> Bool {
        try db.run("DELETE FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)])
        guard db.changes > 0 else { return false }
        db.noteSecretsRemoved()  // the entry's sealed refresh token went with it
        return true
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        let now = Timestamp.nowMillis()
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow("SELECT \(columns) FROM pending_revocations") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope, now: now, legacyAllowed: legacyAllowed) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        var rows: [(entry: PendingRevocation, fields: RecordFields, entryID: [UInt8], sealed: [UInt8], ref: [UInt8])] = []
        let now = Timestamp.nowMillis()
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow(
            """
            SELECT p.entry_id, p.key_id, p.sealed, p.attempts, p.next_attempt_at, p.last_error, p.failed_code,
                   p.created_at, p.account_ref, p.mac
            FROM pending_revocations p
            LEFT JOIN rotation_pending r ON r.entry_id = p.entry_id AND r.old_sealed = p.sealed
            WHERE r.entry_id IS NULL AND p.entry_id > ? ORDER BY p.entry_id LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let opened = try open(row, envelope: current, now: now, legacyAllowed: legacyAllowed)
            rows.append((opened.entry, opened.fields, row.blob(0), row.blob(2), row.blob(8)))
        }
        for row in rows {
            let newRef = next.accountRef(row.entry.account)
            try db.run(
                "INSERT OR REPLACE INTO rotation_pending(entry_id, old_sealed, account_ref, sealed) VALUES (?, ?, ?, ?)",
                [.blob(row.entryID), .blob(row.sealed), .blob(newRef),
                 .blob(next.seal(row.fields, kind: .pendingRevocation, rowKey: row.entryID))])
            try mapRef(db, .account, from: row.ref, to: newRef)
        }
        return (rows.count, rows.last?.entryID)
    }

    /// Swaps the re-sealed copies in, and re-MACs every schedule under `next` (each checked
    /// under `current` first: a schedule altered since its batch stops the switch).
    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        let pending = try count(db)
        var schedules: [([UInt8], OutboxSchedule)] = []
        let now = Timestamp.nowMillis()
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        try db.forEachRow(
            "SELECT entry_id, attempts, next_attempt_at, last_error, failed_code, created_at, mac FROM pending_revocations"
        ) { row in
            let entryID = row.blob(0)
            schedules.append((entryID, try OutboxSchedule(row, from: 1, macColumn: 6).checked(
                entryID: entryID, envelope: current, now: now, legacyAllowed: legacyAllowed)))
        }
        try db.run(
            """
            UPDATE pending_revocations SET key_id = ?, sealed = r.sealed, account_ref = r.account_ref
            FROM rotation_pending r
            WHERE r.entry_id = pending_revocations.entry_id AND r.old_sealed = pending_revocations.sealed
              AND pending_revocations.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == pending else { throw switchMismatch() }
        for (entryID, schedule) in schedules { try schedule.write(db, entryID: entryID, envelope: next) }
    }
}
