import FoundationEssentials

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
        try stateRow(db, userID: userID, envelope: envelope)?.state ?? .notFound
    }

    /// The user's state row, opened: the state and its sealed fields (with the history head).
    private static func stateRow(
        _ db: Database, userID: String, envelope: Envelope
    ) throws -> (state: CredentialState, fields: RecordFields)? {
        let ref = envelope.userRef(userID)
        let row = try db.firstRow(
            "SELECT state, key_id, sealed_user FROM credential_states WHERE user_ref = ?", [.blob(ref)]
        ) { ($0.text(0), $0.blob(1), $0.blob(2)) }
        guard let (column, keyID, sealed) = row else { return nil }
        return try open(column: column, keyID: keyID, sealed: sealed, userRef: ref, userID: userID, envelope: envelope)
    }

    /// Records a change (and its history entry). The same state with the same reason and
    /// detail as the last entry adds nothing (a last entry that fails its check is no match).
    static func record(
        _ db: Database, userID: String, to state: CredentialState, reason: CredentialStateReason, detail: String?,
        envelope: Envelope
    ) throws {
        try CredentialStateReason.validate(reason.rawValue, what: "reason")
        if let detail { try CredentialStateReason.validate(detail, what: "detail") }
        let ref = envelope.userRef(userID)
        let current = try stateRow(db, userID: userID, envelope: envelope)
        let from = current?.state ?? .notFound
        if from == state {
            let entries = try CredentialHistory.entries(db, ref: ref)
            let head = current?.fields.bytes(.historyHead)
            if let last = entries.last, last.reason == reason.rawValue, last.detail == detail,
                CredentialHistory.problems(
                    entries, ref: ref, head: head, envelope: envelope, legacyAllowed: try RowMACBackfill.legacyAllowed(db)
                ).isEmpty
            {
                return
            }
        }
        if from != state { db.noteChange(.credentialStateChanged(userID: userID, from: from, to: state)) }
        let now = Timestamp.nowMillis()
        let head = try CredentialHistory.append(
            db, ref: ref, at: now, from: from.rawValue, to: state.rawValue, reason: reason.rawValue, detail: detail,
            envelope: envelope)
        try db.run(
            """
            INSERT INTO credential_states(user_ref, key_id, sealed_user, state, updated_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(user_ref) DO UPDATE SET key_id = excluded.key_id, sealed_user = excluded.sealed_user,
                state = excluded.state, updated_at = excluded.updated_at
            """,
            [.blob(ref), .blob(envelope.keyID),
             .blob(envelope.seal(sealedFields(userID: userID, state: state.rawValue, head: head), kind: .credentialUser, rowKey: ref)),
             .text(state.rawValue), .int(now)])
    }

    /// Reseals the state row filed under `ref` (if any) with `head` as its history head (the
    /// history was re-MACed: ``RowMACBackfill``). Returns whether there was a row.
    /// - Throws: `integrityCheckFailed` when the row does not open (nothing is written).
    static func replaceHead(_ db: Database, ref: [UInt8], head: [UInt8], envelope: Envelope) throws -> Bool {
        guard let (column, keyID, sealed) = try db.firstRow(
            "SELECT state, key_id, sealed_user FROM credential_states WHERE user_ref = ?", [.blob(ref)],
            { ($0.text(0), $0.blob(1), $0.blob(2)) })
        else { return false }
        let fields = try open(column: column, keyID: keyID, sealed: sealed, userRef: ref, envelope: envelope).fields
        let userID = fields.string(.userID) ?? ""
        try db.run(
            "UPDATE credential_states SET key_id = ?, sealed_user = ? WHERE user_ref = ?",
            [.blob(envelope.keyID),
             .blob(envelope.seal(sealedFields(userID: userID, state: column, head: head), kind: .credentialUser, rowKey: ref)),
             .blob(ref)])
        return true
    }

    private static func sealedFields(userID: String, state: String, head: [UInt8]?) -> RecordFields {
        var fields = RecordFields()
        fields.set(.userID, userID)
        fields.set(.credentialState, state)
        if let head { fields.set(.historyHead, head) }
        return fields
    }

    /// Every recorded change for the user, oldest first, checked: each entry against its MAC and
    /// the chain, the last against the head sealed in the user's state.
    /// - Throws: `integrityCheckFailed` when an entry was altered, forged or deleted.
    static func history(_ db: Database, userID: String, envelope: Envelope) throws -> [CredentialStateTransition] {
        let head = try stateRow(db, userID: userID, envelope: envelope)?.fields.bytes(.historyHead)
        return try CredentialHistory.checkedEntries(db, ref: envelope.userRef(userID), head: head, envelope: envelope)
            .map(\.transition)
    }

    /// The history row read from column `first` on: at, from, to, reason, detail.
    static func transition(_ row: Row, from first: Int32) -> CredentialStateTransition {
        CredentialStateTransition(
            date: Timestamp.date(fromMillis: row.int(first)),
            from: CredentialState(rawValue: row.text(first + 1)) ?? .notFound,
            to: CredentialState(rawValue: row.text(first + 2)) ?? .notFound,
            reason: CredentialStateReason(rawValue: row.text(first + 3)), detail: row.textOrNil(first + 4))
    }

    /// The last detail code recorded for a user, if any. A history that fails its check answers
    /// `unverified` (a detail, so a confirmation is recorded rather than skipped).
    static func lastDetail(_ db: Database, userID: String, envelope: Envelope) throws -> String? {
        let ref = envelope.userRef(userID)
        let head = try stateRow(db, userID: userID, envelope: envelope)?.fields.bytes(.historyHead)
        let entries = try CredentialHistory.entries(db, ref: ref)
        guard CredentialHistory.problems(
                    entries, ref: ref, head: head, envelope: envelope, legacyAllowed: try RowMACBackfill.legacyAllowed(db)
                ).isEmpty else { return "unverified" }
        return entries.last?.detail
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
            check(row.blob(0)) {
                _ = try open(column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: row.blob(0), envelope: envelope)
            }
        }
    }

    /// Every user's state, by user id, from the rows that open (a change watcher's snapshot; a
    /// row that does not open is left out: `verify` reports it).
    static func allStates(_ db: Database, envelope: Envelope) throws -> [String: CredentialState] {
        var states: [String: CredentialState] = [:]
        try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
            do {
                let opened = try open(
                    column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: row.blob(0), envelope: envelope)
                if let userID = opened.fields.string(.userID) { states[userID] = opened.state }
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                return
            }
        }
        return states
    }

    /// The history head sealed in each state row that opens (nil for a state from before schema 7).
    static func historyHeads(_ db: Database, envelope: Envelope) throws -> [[UInt8]: [UInt8]?] {
        var heads: [[UInt8]: [UInt8]?] = [:]
        try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
            let ref = row.blob(0)
            do {
                let fields = try open(column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: ref, envelope: envelope).fields
                heads[ref] = .some(fields.bytes(.historyHead))
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                heads[ref] = .some(nil)  // reported as a bad state row; its chain is still checked
            }
        }
        return heads
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
            // The history is re-MACed in the switch; the new head is computed the same way here.
            let head = try CredentialHistory.rechain(db, from: row.ref, to: newRef, current: current, next: next, write: false)
            let fields = sealedFields(userID: row.userID, state: row.fields.string(.credentialState) ?? "", head: head)
            try db.run(
                "INSERT OR REPLACE INTO rotation_states(old_user_ref, old_sealed, user_ref, sealed_user) VALUES (?, ?, ?, ?)",
                [.blob(row.ref), .blob(row.sealed), .blob(newRef),
                 .blob(next.seal(fields, kind: .credentialUser, rowKey: newRef))])
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
        // Every chain re-MACed under the next key and the user's new hash (rows filed under
        // another hash, e.g. a discarded unreadable entry's account, keep theirs).
        let watermark = try CredentialHistory.resetWatermark(db)
        var refs: [([UInt8], [UInt8])] = []
        try db.forEachRow(
            """
            SELECT DISTINCT h.user_ref, coalesce(m.new_ref, h.user_ref) FROM credential_history h
            LEFT JOIN rotation_refs m ON m.domain = ? AND m.old_ref = h.user_ref WHERE h.id > ?
            """, [.int(Int64(LookupDomain.user.rawValue)), .int(watermark)]
        ) { refs.append(($0.blob(0), $0.blob(1))) }
        for (old, new) in refs {
            try CredentialHistory.rechain(db, from: old, to: new, current: current, next: next, write: true)
        }
        try db.run(
            """
            UPDATE credential_history SET user_ref = m.new_ref FROM rotation_refs m
            WHERE m.domain = ? AND m.old_ref = credential_history.user_ref
            """, [.int(Int64(LookupDomain.user.rawValue))])
    }
}
