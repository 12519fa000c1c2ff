import Foundation

/// A row of `pending_revocations`: a refresh token waiting to be revoked at the authorization
/// server, sealed with its account's names, the Apple user id and the logout reason, filed
/// under a random entry id and the keyed hash of its account (`account_ref`).
enum OutboxRecord: SealedTable {
    static let table = "pending_revocations"
    static let holdsSecrets = true
    static let rotationTable = "rotation_pending"
    private static let columns =
        "entry_id, key_id, sealed, attempts, next_attempt_at, last_error, failed_code, created_at, account_ref"

    /// Opens one row of ``columns`` (the entry) and checks it belongs where it is.
    private static func open(_ row: Row, envelope: Envelope) throws -> (entry: PendingRevocation, fields: RecordFields) {
        let entryID = row.blob(0)
        let fields = try envelope.open(row.blob(2), keyID: row.blob(1), kind: .pendingRevocation, rowKey: entryID)
        guard let service = fields.string(.service), let name = fields.string(.account), let token = fields.secret,
            case let account = AccountID(name, service: service), envelope.accountRef(account) == row.blob(8)
        else { throw TokenStoreError(.integrityCheckFailed, "A pending revocation is missing fields or misplaced.") }
        let entry = PendingRevocation(
            id: Hex.encode(entryID), account: account, appleUserID: fields.string(.appleUserID),
            refreshToken: token, reason: CredentialStateReason(rawValue: fields.string(.label) ?? "userLogout"),
            attempts: Int(row.int(3)), nextAttemptAt: Timestamp.date(fromMillis: row.int(4)),
            lastError: row.textOrNil(5), failureCode: row.textOrNil(6), createdAt: Timestamp.date(fromMillis: row.int(7)))
        return (entry, fields)
    }

    /// The entries matching `whereSQL` (with bound `arguments`), oldest first.
    static func entries(_ db: Database, where whereSQL: String = "1", _ arguments: [SQLValue] = [], envelope: Envelope)
        throws -> [PendingRevocation]
    {
        var entries: [PendingRevocation] = []
        try db.forEachRow(
            "SELECT \(columns) FROM pending_revocations WHERE \(whereSQL) ORDER BY created_at, entry_id", arguments
        ) { entries.append(try open($0, envelope: envelope).entry) }
        return entries
    }

    /// The entries of one account, oldest first.
    static func entries(_ db: Database, of account: AccountID, envelope: Envelope) throws -> [PendingRevocation] {
        try entries(db, where: "account_ref = ?", [.blob(envelope.accountRef(account))], envelope: envelope)
            .filter { $0.account == account }
    }

    /// Queues `token` in the outbox; returns the new entry's id.
    @discardableResult
    static func insert(
        _ db: Database, _ account: AccountID, appleUserID: String?, token: SecretBytes,
        reason: CredentialStateReason, envelope: Envelope
    ) throws -> [UInt8] {
        let entryID = SecretBytes.random(count: 16).copyBytes()
        var fields = RecordFields()
        fields.set(.service, account.service)
        fields.set(.account, account.name)
        if let appleUserID { fields.set(.appleUserID, appleUserID) }
        fields.set(.label, reason.rawValue)
        fields.setSecret(token)
        let now = Timestamp.nowMillis()
        try db.run(
            """
            INSERT INTO pending_revocations(entry_id, account_ref, key_id, sealed, attempts, next_attempt_at, created_at)
            VALUES (?, ?, ?, ?, 0, ?, ?)
            """,
            [.blob(entryID), .blob(envelope.accountRef(account)), .blob(envelope.keyID),
             .blob(envelope.seal(fields, kind: .pendingRevocation, rowKey: entryID)), .int(now), .int(now)])
        return entryID
    }

    /// The 16-byte id of an entry, from its hex form.
    static func entryID(_ entry: PendingRevocation) throws -> [UInt8] {
        guard let entryID = Hex.decode(entry.id), entryID.count == 16 else {
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
        return db.changes > 0
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        try db.forEachRow("SELECT \(columns) FROM pending_revocations") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        var rows: [(entry: PendingRevocation, fields: RecordFields, entryID: [UInt8], sealed: [UInt8], ref: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT p.entry_id, p.key_id, p.sealed, p.attempts, p.next_attempt_at, p.last_error, p.failed_code,
                   p.created_at, p.account_ref
            FROM pending_revocations p
            LEFT JOIN rotation_pending r ON r.entry_id = p.entry_id AND r.old_sealed = p.sealed
            WHERE r.entry_id IS NULL AND p.entry_id > ? ORDER BY p.entry_id LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let opened = try open(row, envelope: current)
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

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        let pending = try count(db)
        try db.run(
            """
            UPDATE pending_revocations SET key_id = ?, sealed = r.sealed, account_ref = r.account_ref
            FROM rotation_pending r
            WHERE r.entry_id = pending_revocations.entry_id AND r.old_sealed = pending_revocations.sealed
              AND pending_revocations.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == pending else { throw switchMismatch() }
    }
}
