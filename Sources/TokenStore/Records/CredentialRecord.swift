import Foundation

/// A row of `credential_states`: one Apple user id's credential state, filed under the keyed
/// hash of the id (`user_ref`). The clear `state` column is only an index: the state is sealed
/// with the id, and the two must agree. Each change is also appended to `credential_history`.
enum CredentialRecord: SealedTable {
    static let table = "credential_states"
    static let holdsSecrets = false
    static let rotationTable = "rotation_states"

    /// Opens a row and returns its state, checked against the sealed copy: a changed clear
    /// column (or a blob moved from another user) is `integrityCheckFailed`.
    private static func open(
        column: String, keyID: [UInt8], sealed: [UInt8], userRef ref: [UInt8], userID: String? = nil, envelope: Envelope
    ) throws -> (state: CredentialState, fields: RecordFields) {
        let fields = try envelope.open(sealed, keyID: keyID, kind: .credentialUser, rowKey: ref)
        guard let sealedUser = fields.string(.userID), envelope.userRef(sealedUser) == ref,
            userID == nil || sealedUser == userID,
            let sealedState = fields.string(.credentialState), sealedState == column,
            let state = CredentialState(rawValue: sealedState)
        else {
            throw TokenStoreError(.integrityCheckFailed, "A credential-state row was altered: its state does not match its sealed copy.")
        }
        return (state, fields)
    }

    /// The user's current state (`notFound` when there is no row).
    static func state(_ db: Database, userID: String, envelope: Envelope) throws -> CredentialState {
        let ref = envelope.userRef(userID)
        let row = try db.firstRow(
            "SELECT state, key_id, sealed_user FROM credential_states WHERE user_ref = ?", [.blob(ref)]
        ) { ($0.text(0), $0.blob(1), $0.blob(2)) }
        guard let (column, keyID, sealed) = row else { return .notFound }
        return try open(column: column, keyID: keyID, sealed: sealed, userRef: ref, userID: userID, envelope: envelope).state
    }

    /// Records a change (and its history entry). The same state with the same reason and
    /// detail as the last entry adds nothing.
    static func record(
        _ db: Database, userID: String, to state: CredentialState, reason: CredentialStateReason, detail: String?,
        envelope: Envelope
    ) throws {
        try CredentialStateReason.validate(reason.rawValue, what: "reason")
        if let detail { try CredentialStateReason.validate(detail, what: "detail") }
        let ref = envelope.userRef(userID)
        let from = try self.state(db, userID: userID, envelope: envelope)
        if from == state {
            let last = try db.firstRow(
                "SELECT reason, detail FROM credential_history WHERE user_ref = ? ORDER BY id DESC LIMIT 1", [.blob(ref)]
            ) { ($0.text(0), $0.textOrNil(1)) }
            if let last, last.0 == reason.rawValue, last.1 == detail { return }
        }
        var fields = RecordFields()
        fields.set(.userID, userID)
        fields.set(.credentialState, state.rawValue)
        let now = Timestamp.nowMillis()
        try db.run(
            """
            INSERT INTO credential_states(user_ref, key_id, sealed_user, state, updated_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(user_ref) DO UPDATE SET key_id = excluded.key_id, sealed_user = excluded.sealed_user,
                state = excluded.state, updated_at = excluded.updated_at
            """,
            [.blob(ref), .blob(envelope.keyID), .blob(envelope.seal(fields, kind: .credentialUser, rowKey: ref)),
             .text(state.rawValue), .int(now)])
        try db.run(
            "INSERT INTO credential_history(user_ref, at, from_state, to_state, reason, detail) VALUES (?, ?, ?, ?, ?, ?)",
            [.blob(ref), .int(now), .text(from.rawValue), .text(state.rawValue), .text(reason.rawValue),
             detail.map(SQLValue.text) ?? .null])
    }

    /// Every recorded change for the user, oldest first.
    static func history(_ db: Database, userID: String, envelope: Envelope) throws -> [CredentialStateTransition] {
        var history: [CredentialStateTransition] = []
        try db.forEachRow(
            "SELECT at, from_state, to_state, reason, detail FROM credential_history WHERE user_ref = ? ORDER BY id",
            [.blob(envelope.userRef(userID))]
        ) { history.append(transition($0, from: 0)) }
        return history
    }

    /// The history row read from column `first` on: at, from, to, reason, detail.
    static func transition(_ row: Row, from first: Int32) -> CredentialStateTransition {
        CredentialStateTransition(
            date: Timestamp.date(fromMillis: row.int(first)),
            from: CredentialState(rawValue: row.text(first + 1)) ?? .notFound,
            to: CredentialState(rawValue: row.text(first + 2)) ?? .notFound,
            reason: CredentialStateReason(rawValue: row.text(first + 3)), detail: row.textOrNil(first + 4))
    }

    /// The last detail code recorded for a user, if any.
    static func lastDetail(_ db: Database, userID: String, envelope: Envelope) throws -> String? {
        try db.firstRow(
            "SELECT detail FROM credential_history WHERE user_ref = ? ORDER BY id DESC LIMIT 1",
            [.blob(envelope.userRef(userID))]
        ) { $0.textOrNil(0) } ?? nil
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
            check(row.blob(0)) {
                _ = try open(column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: row.blob(0), envelope: envelope)
            }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        var rows: [(fields: RecordFields, userID: String, ref: [UInt8], sealed: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT s.user_ref, s.key_id, s.sealed_user, s.state FROM credential_states s
            LEFT JOIN rotation_states r ON r.old_user_ref = s.user_ref AND r.old_sealed = s.sealed_user
            WHERE r.old_user_ref IS NULL AND s.user_ref > ? ORDER BY s.user_ref LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let fields = try open(
                column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: row.blob(0), envelope: current
            ).fields
            rows.append((fields, fields.string(.userID) ?? "", row.blob(0), row.blob(2)))
        }
        for row in rows {
            let newRef = next.userRef(row.userID)
            try db.run(
                "INSERT OR REPLACE INTO rotation_states(old_user_ref, old_sealed, user_ref, sealed_user) VALUES (?, ?, ?, ?)",
                [.blob(row.ref), .blob(row.sealed), .blob(newRef),
                 .blob(next.seal(row.fields, kind: .credentialUser, rowKey: newRef))])
            try mapRef(db, .user, from: row.ref, to: newRef)
        }
        return (rows.count, rows.last?.ref)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        let states = try count(db)
        try db.run(
            """
            INSERT INTO credential_states(user_ref, key_id, sealed_user, state, updated_at)
            SELECT r.user_ref, ?, r.sealed_user, s.state, s.updated_at
            FROM credential_states s JOIN rotation_states r ON r.old_user_ref = s.user_ref AND r.old_sealed = s.sealed_user
            WHERE s.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == states else { throw switchMismatch() }
        try db.run("DELETE FROM credential_states WHERE key_id = ?", [.blob(current.keyID)])
        try db.run(
            """
            UPDATE credential_history SET user_ref = m.new_ref FROM rotation_refs m
            WHERE m.domain = ? AND m.old_ref = credential_history.user_ref
            """, [.int(Int64(LookupDomain.user.rawValue))])
    }
}
