import Foundation

extension TokenStore {
    /// The credential state of an Apple user id: `authorized`, `revoked`, or `notFound`.
    /// - Throws: `invalidInput` for an empty or oversize id; storage errors.
    public func credentialState(forUserID userID: String) throws -> CredentialState {
        try Self.validate(userID: userID)
        return try read { db in try currentState(db, userID: userID) }
    }

    /// Records a change of credential state with its reason (and an optional detail code).
    /// Recording the state a user already has with the same reason and detail adds nothing.
    /// - Throws: `invalidInput` (reason/detail not a short code), storage errors.
    public func recordCredentialState(
        _ state: CredentialState, forUserID userID: String, reason: CredentialStateReason, detail: String? = nil
    ) throws {
        try Self.validate(userID: userID)
        try write { db in try recordState(db, userID: userID, to: state, reason: reason, detail: detail) }
    }

    /// Every recorded change for an Apple user id, oldest first.
    public func credentialStateHistory(forUserID userID: String) throws -> [CredentialStateTransition] {
        try Self.validate(userID: userID)
        return try read { db in
            var history: [CredentialStateTransition] = []
            try db.forEachRow(
                "SELECT at, from_state, to_state, reason, detail FROM credential_history WHERE user_ref = ? ORDER BY id",
                [.blob(userRef(userID))]
            ) { row in
                history.append(CredentialStateTransition(
                    date: Timestamp.date(fromMillis: row.int(0)),
                    from: CredentialState(rawValue: row.text(1)) ?? .notFound,
                    to: CredentialState(rawValue: row.text(2)) ?? .notFound,
                    reason: CredentialStateReason(rawValue: row.text(3)),
                    detail: row.textOrNil(4)))
            }
            return history
        }
    }

    // MARK: Internals

    func currentState(_ db: Database, userID: String) throws -> CredentialState {
        let ref = userRef(userID)
        let row = try db.firstRow(
            "SELECT state, key_id, sealed_user FROM credential_states WHERE user_ref = ?", [.blob(ref)]
        ) { ($0.text(0), $0.blob(1), $0.blob(2)) }
        guard let (column, keyID, sealed) = row else { return .notFound }
        return try authenticatedState(column: column, keyID: keyID, sealed: sealed, userRef: ref, userID: userID)
    }

    /// The state of a `credential_states` row, checked against the sealed copy: the clear
    /// column is only an index, a change to it (or a blob moved from another user) is
    /// `integrityCheckFailed`.
    func authenticatedState(
        column: String, keyID: [UInt8], sealed: [UInt8], userRef ref: [UInt8], userID: String? = nil
    ) throws -> CredentialState {
        let fields = try open(sealed, keyID: keyID, kind: .credentialUser, rowKey: ref)
        guard let sealedUser = fields.string(.userID), userRef(sealedUser) == ref, userID == nil || sealedUser == userID,
              let sealedState = fields.string(.credentialState), sealedState == column,
              let state = CredentialState(rawValue: sealedState)
        else {
            throw TokenStoreError(.integrityCheckFailed, "A credential-state row was altered: its state does not match its sealed copy.")
        }
        return state
    }

    func recordState(
        _ db: Database, userID: String, to state: CredentialState, reason: CredentialStateReason, detail: String?
    ) throws {
        try CredentialStateReason.validate(reason.rawValue, what: "reason")
        if let detail { try CredentialStateReason.validate(detail, what: "detail") }
        let ref = userRef(userID)
        let from = try currentState(db, userID: userID)
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
            [.blob(ref), .blob(dataKey.keyID), .blob(seal(fields, kind: .credentialUser, rowKey: ref)),
             .text(state.rawValue), .int(now)])
        try db.run(
            "INSERT INTO credential_history(user_ref, at, from_state, to_state, reason, detail) VALUES (?, ?, ?, ?, ?, ?)",
            [.blob(ref), .int(now), .text(from.rawValue), .text(state.rawValue), .text(reason.rawValue),
             detail.map(SQLValue.text) ?? .null])
    }

    /// The last detail code recorded for a user, if any.
    func lastDetail(_ db: Database, userID: String) throws -> String? {
        try db.firstRow(
            "SELECT detail FROM credential_history WHERE user_ref = ? ORDER BY id DESC LIMIT 1", [.blob(userRef(userID))]
        ) { $0.textOrNil(0) } ?? nil
    }

    static func validate(userID: String) throws {
        guard !userID.isEmpty else { throw TokenStoreError(.invalidInput, "The user id is empty.") }
        guard userID.utf8.count <= StoreLimits.maxIdentifierBytes else {
            throw TokenStoreError(.invalidInput, "The user id is longer than \(StoreLimits.maxIdentifierBytes) bytes.")
        }
    }
}
