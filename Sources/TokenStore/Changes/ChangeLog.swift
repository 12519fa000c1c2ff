import FoundationEssentials

/// The sealed change log (`change_log`, schema 14): one row per ``StoreChange``, in commit
/// order, sealed under the data key and bound to its sequence number.
///
/// A write transaction appends the changes its records noted (``Database/noteChange(_:)``)
/// before it commits; a key switch re-seals the rows under the new key in the same transaction.
/// A reader (``ChangeWatcher``) asks for the rows after the last sequence number it saw; when
/// some of them are gone (pruned: more than ``kept`` changes since it last looked, or a reset),
/// it diffs a ``Snapshot`` of the store instead.
enum ChangeLog {
    /// How many rows are kept (the newest).
    static let kept: Int64 = 512

    /// Whether the store's schema has the log (version 14 on).
    static func exists(_ db: Database) throws -> Bool {
        try !SealedTables.existing(["change_log"], in: db).isEmpty
    }

    /// Inside a write transaction: appends `changes` after the newest row, sealed under
    /// `envelope`, and prunes the rows older than the newest ``kept``.
    static func append(_ db: Database, _ changes: [StoreChange], envelope: Envelope) throws {
        var seq = try newest(db)
        let now = Timestamp.nowMillis()
        for change in changes {
            seq += 1
            try db.run(
                "INSERT INTO change_log(seq, key_id, sealed, at) VALUES (?, ?, ?, ?)",
                [.int(seq), .blob(envelope.keyID), .blob(envelope.seal(fields(change), kind: .changeEvent, rowKey: rowKey(seq))),
                 .int(now)])
        }
        try db.run("DELETE FROM change_log WHERE seq <= ?", [.int(seq - kept)])
    }

    /// Inside a key switch's transaction: every row re-sealed from `current` to `next`. A row
    /// that does not open is deleted (a reader that had not seen it diffs its snapshot instead).
    static func reseal(_ db: Database, from current: Envelope, to next: Envelope) throws {
        var rows: [(seq: Int64, keyID: [UInt8], sealed: [UInt8])] = []
        try db.forEachRow("SELECT seq, key_id, sealed FROM change_log ORDER BY seq") { rows.append(($0.int(0), $0.blob(1), $0.blob(2))) }
        for row in rows {
            do {
                let fields = try current.open(row.sealed, keyID: row.keyID, kind: .changeEvent, rowKey: rowKey(row.seq))
                try db.run(
                    "UPDATE change_log SET key_id = ?, sealed = ? WHERE seq = ?",
                    [.blob(next.keyID), .blob(next.seal(fields, kind: .changeEvent, rowKey: rowKey(row.seq))), .int(row.seq)])
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                try db.run("DELETE FROM change_log WHERE seq = ?", [.int(row.seq)])
            }
        }
    }

    /// The newest sequence number (0 for an empty log).
    static func newest(_ db: Database) throws -> Int64 {
        try db.scalarInt("SELECT max(seq) FROM change_log") ?? 0
    }

    /// What a reader finds after sequence number `last`: the changes in order with their
    /// numbers, the newest number, and whether rows it never saw are missing (`gap`: pruned,
    /// a reset, or a row that does not open), in which case `changes` stops before the hole.
    struct Read {
        var changes: [(seq: Int64, change: StoreChange)] = []
        var newest: Int64 = 0
        var gap = false
    }

    static func read(_ db: Database, after last: Int64, envelope: Envelope) throws -> Read {
        var result = Read(newest: try newest(db))
        if result.newest < last { result.gap = true }  // the log was emptied (a reset) and began again
        var expected = last + 1
        try db.forEachRow("SELECT seq, key_id, sealed FROM change_log WHERE seq > ? ORDER BY seq", [.int(last)]) { row in
            let seq = row.int(0)
            guard !result.gap, seq == expected else {
                result.gap = true
                return
            }
            do {
                let fields = try envelope.open(row, sealed: 2, keyID: 1, kind: .changeEvent, rowKey: rowKey(seq))
                guard let change = change(fields) else { throw TokenStoreError(.integrityCheckFailed, "A change-log row is malformed.") }
                result.changes.append((seq, change))
                expected += 1
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                result.gap = true
            }
        }
        return result
    }

    // MARK: Rows

    /// The associated data's row key: the sequence number, big-endian.
    private static func rowKey(_ seq: Int64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: seq) >> (56 - 8 * $0)) }
    }

    private static func fields(_ change: StoreChange) -> RecordFields {
        var fields = RecordFields()
        fields.set(.changeKind, [change.kind.code])
        switch change {
        case .accountAdded(let account), .accountRemoved(let account), .tokensRenewed(let account):
            fields.set(.service, account.service)
            fields.set(.account, account.name)
        case .credentialStateChanged(let userID, let from, let to):
            fields.set(.userID, userID)
            fields.set(.fromState, from.rawValue)
            fields.set(.credentialState, to.rawValue)
        case .keyRotated, .storeLocked, .storeUnlocked:
            break
        }
        return fields
    }

    private static func change(_ fields: RecordFields) -> StoreChange? {
        guard let code = fields.bytes(.changeKind), code.count == 1, let kind = StoreChange.Kind(code: code[0]) else { return nil }
        func account() -> AccountID? {
            guard let service = fields.string(.service), let name = fields.string(.account) else { return nil }
            return AccountID(name, service: service)
        }
        switch kind {
        case .accountAdded: return account().map(StoreChange.accountAdded)
        case .accountRemoved: return account().map(StoreChange.accountRemoved)
        case .tokensRenewed: return account().map(StoreChange.tokensRenewed)
        case .keyRotated: return .keyRotated
        case .storeLocked, .storeUnlocked: return nil  // never logged: a row saying so does not open
        case .credentialStateChanged:
            guard let userID = fields.string(.userID),
                let from = fields.string(.fromState).flatMap(CredentialState.init(rawValue:)),
                let to = fields.string(.credentialState).flatMap(CredentialState.init(rawValue:))
            else { return nil }
            return .credentialStateChanged(userID: userID, from: from, to: to)
        }
    }

    // MARK: Snapshots

    /// What a watcher diffs when it missed rows: the accounts that hold a refresh token, each
    /// user's credential state and the active key. Identifiers only; held in the watching
    /// process's memory, never written.
    struct Snapshot: Equatable {
        var accounts: Set<AccountID> = []
        var states: [String: CredentialState] = [:]
        var keyID: [UInt8] = []

        static func take(_ db: Database, envelope: Envelope) throws -> Snapshot {
            var snapshot = Snapshot(keyID: envelope.keyID)
            try ItemRecord.forEach(db, kind: .refreshToken, envelope: envelope) { snapshot.accounts.insert($0.key.account) }
            snapshot.states = try CredentialRecord.allStates(db, envelope: envelope)
            return snapshot
        }

        /// Follows one logged change (so that a later diff starts from the right place).
        mutating func apply(_ change: StoreChange, keyID newKeyID: [UInt8]) {
            switch change {
            case .accountAdded(let account): accounts.insert(account)
            case .accountRemoved(let account): accounts.remove(account)
            case .credentialStateChanged(let userID, _, let to): states[userID] = to
            case .keyRotated: keyID = newKeyID
            case .tokensRenewed, .storeLocked, .storeUnlocked: break
            }
        }

        /// The changes that lead from this snapshot to `newer`: accounts removed, states
        /// changed, accounts added (each sorted), then a key switch. Renewals leave no trace in
        /// a snapshot and are not among them.
        func changes(to newer: Snapshot) -> [StoreChange] {
            func sorted(_ accounts: Set<AccountID>) -> [AccountID] {
                accounts.sorted { ($0.service, $0.name) < ($1.service, $1.name) }
            }
            var changes = sorted(accounts.subtracting(newer.accounts)).map(StoreChange.accountRemoved)
            for userID in Set(states.keys).union(newer.states.keys).sorted() {
                let from = states[userID] ?? .notFound
                let to = newer.states[userID] ?? .notFound
                if from != to { changes.append(.credentialStateChanged(userID: userID, from: from, to: to)) }
            }
            changes += sorted(newer.accounts.subtracting(accounts)).map(StoreChange.accountAdded)
            if keyID != newer.keyID { changes.append(.keyRotated) }
            return changes
        }
    }
}
