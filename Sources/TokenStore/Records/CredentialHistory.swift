import FoundationEssentials

/// `credential_history`: every change of a user's credential state, in the clear (time, from,
/// to, reason, detail) under the user's keyed hash.
///
/// Each row carries a MAC over (table, id, user hash, its columns, the MAC of the previous row
/// of the same user), so a row edited, forged or deleted from the middle breaks the chain; the
/// user's credential state seals the MAC of the last row (its "head"), so deleting or editing
/// the last row is caught too while the state row exists. From schema version 10 on every row
/// has a MAC (``RowMACBackfill``) and one without is tampering; below it, rows written before
/// schema 7 have none (legacy, unauthenticated) and may only precede the first row that has one. An empty
/// MAC marks a row that failed its check during a key rotation (kept, still reported). Rows up
/// to the last store reset are under a key that is gone and are not checked.
enum CredentialHistory {
    static let table = "credential_history"

    struct Entry {
        let id: Int64
        let at: Int64
        let from: String
        let to: String
        let reason: String
        let detail: String?
        let mac: [UInt8]?

        static let columns = "id, at, from_state, to_state, reason, detail, mac"

        init(_ row: Row) {
            id = row.int(0)
            at = row.int(1)
            from = row.text(2)
            to = row.text(3)
            reason = row.text(4)
            detail = row.textOrNil(5)
            mac = row.isNull(6) ? nil : row.blob(6)
        }

        func expectedMAC(ref: [UInt8], previous: [UInt8]?, envelope: Envelope) -> [UInt8] {
            CredentialHistory.mac(
                id: id, ref: ref, at: at, from: from, to: to, reason: reason, detail: detail, previous: previous,
                envelope: envelope)
        }

        var transition: CredentialStateTransition {
            CredentialStateTransition(
                date: Timestamp.date(fromMillis: at), from: CredentialState(rawValue: from) ?? .notFound,
                to: CredentialState(rawValue: to) ?? .notFound, reason: CredentialStateReason(rawValue: reason),
                detail: detail)
        }
    }

    static func mac(
        id: Int64, ref: [UInt8], at: Int64, from: String, to: String, reason: String, detail: String?,
        previous: [UInt8]?, envelope: Envelope
    ) -> [UInt8] {
        envelope.mac(
            .historyRowMAC,
            [MACField.name(table), MACField.int(id), ref, MACField.int(at), Array(from.utf8), Array(to.utf8),
             Array(reason.utf8), MACField.text(detail), MACField.blob(previous)])
    }

    /// Rows up to this id predate the last reset: keyed under a lost key, never checked.
    static func resetWatermark(_ db: Database) throws -> Int64 {
        try db.scalarInt("SELECT coalesce(max(last_history_id), 0) FROM store_resets") ?? 0
    }

    /// The rows of one user (or of the account hash a discarded unreadable entry is filed
    /// under), oldest first.
    static func entries(_ db: Database, ref: [UInt8]) throws -> [Entry] {
        let watermark = try resetWatermark(db)
        var entries: [Entry] = []
        try db.forEachRow(
            "SELECT \(Entry.columns) FROM credential_history WHERE user_ref = ? AND id > ? ORDER BY id", [.blob(ref), .int(watermark)]
        ) { entries.append(Entry($0)) }
        return entries
    }

    /// Appends a row chained to the user's last one; returns its MAC (the new head). A row to
    /// `revoked` makes the transaction raise the store epoch (a copy of the file from before it
    /// would show the user authorized again).
    @discardableResult
    static func append(
        _ db: Database, ref: [UInt8], at: Int64, from: String, to: String, reason: String, detail: String?, envelope: Envelope
    ) throws -> [UInt8] {
        let previous = try db.firstRow(
            "SELECT mac FROM credential_history WHERE user_ref = ? ORDER BY id DESC LIMIT 1", [.blob(ref)]
        ) { $0.isNull(0) ? nil : $0.blob(0) } ?? nil
        let id = (try db.scalarInt("SELECT coalesce(max(id), 0) FROM credential_history") ?? 0) + 1
        let mac = mac(id: id, ref: ref, at: at, from: from, to: to, reason: reason, detail: detail, previous: previous, envelope: envelope)
        try db.run(
            "INSERT INTO credential_history(id, user_ref, at, from_state, to_state, reason, detail, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [.int(id), .blob(ref), .int(at), .text(from), .text(to), .text(reason), detail.map(SQLValue.text) ?? .null, .blob(mac)])
        if to == CredentialState.revoked.rawValue { db.requireEpochRaise(.userRecordedRevoked) }
        return mac
    }

    /// The problems of one user's chain: each bad row's id and why. With `head` (sealed in the
    /// user's state), the last row must be the one it names.
    /// `legacyAllowed`: rows without a MAC before the first one with a MAC are legacy, not a
    /// problem (a store below schema version 10).
    static func problems(
        _ entries: [Entry], ref: [UInt8], head: [UInt8]?, envelope: Envelope, legacyAllowed: Bool
    ) -> [(Int64, String)] {
        var problems: [(Int64, String)] = []
        var previous: [UInt8]?
        var authenticated = false
        for entry in entries {
            if let mac = entry.mac {
                if !MACField.equal(mac, entry.expectedMAC(ref: ref, previous: previous, envelope: envelope)) {
                    problems.append((entry.id, "A credential-history entry was altered, or one before it deleted: it does not match its MAC."))
                }
                authenticated = true
            } else if authenticated || !legacyAllowed {
                problems.append((entry.id, "A credential-history entry lost its MAC."))
            }
            previous = entry.mac
        }
        if let head, !MACField.equal(head, entries.last?.mac ?? []) {
            problems.append((entries.last?.id ?? 0, "The credential history's last entry is not the one the credential state names: it was deleted or altered."))
        }
        return problems
    }

    /// The user's entries, checked. - Throws: `integrityCheckFailed` on the first problem.
    static func checkedEntries(_ db: Database, ref: [UInt8], head: [UInt8]?, envelope: Envelope) throws -> [Entry] {
        let entries = try entries(db, ref: ref)
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        if let problem = problems(entries, ref: ref, head: head, envelope: envelope, legacyAllowed: legacyAllowed).first {
            throw TokenStoreError(.integrityCheckFailed, problem.1)
        }
        return entries
    }

    /// Checks every chain (the state rows' heads from `heads`), reporting each row's problem
    /// under a short id (`<user hash prefix>#<row id>`).
    static func verifyRows(
        _ db: Database, envelope: Envelope, heads: [[UInt8]: [UInt8]?], _ report: (String, String?) -> Void
    ) throws {
        let watermark = try resetWatermark(db)
        var refs: [[UInt8]] = []
        try db.forEachRow("SELECT DISTINCT user_ref FROM credential_history WHERE id > ?", [.int(watermark)]) { refs.append($0.blob(0)) }
        for (ref, head) in heads where head != nil && !refs.contains(ref) { refs.append(ref) }
        let legacyAllowed = try RowMACBackfill.legacyAllowed(db)
        for ref in refs {
            let entries = try entries(db, ref: ref)
            let problems = problems(entries, ref: ref, head: heads[ref] ?? nil, envelope: envelope, legacyAllowed: legacyAllowed)
            let label = Hex.encode(Array(ref.prefix(6)))
            for entry in entries where !problems.contains(where: { $0.0 == entry.id }) { report("\(label)#\(entry.id)", nil) }
            for problem in problems { report("\(label)#\(problem.0)", "integrityCheckFailed: \(problem.1)") }
        }
    }

    /// In a key switch: re-MACs the chain of `oldRef` under `next` as `newRef` (each row
    /// checked under `current`; one that fails keeps an empty MAC, so it stays reported).
    /// With `write` false nothing is written. Returns the new head (nil: no row with a MAC).
    @discardableResult
    static func rechain(
        _ db: Database, from oldRef: [UInt8], to newRef: [UInt8], current: Envelope, next: Envelope, write: Bool
    ) throws -> [UInt8]? {
        var oldPrevious: [UInt8]?
        var newPrevious: [UInt8]?
        var authenticated = false
        for entry in try entries(db, ref: oldRef) {
            var newMAC: [UInt8]?
            if let mac = entry.mac {
                let sound = MACField.equal(mac, entry.expectedMAC(ref: oldRef, previous: oldPrevious, envelope: current))
                newMAC = sound ? entry.expectedMAC(ref: newRef, previous: newPrevious, envelope: next) : []
                authenticated = true
            } else if authenticated {
                newMAC = []
            }
            if write {
                try db.run("UPDATE credential_history SET mac = ? WHERE id = ?", [newMAC.map(SQLValue.blob) ?? .null, .int(entry.id)])
            }
            oldPrevious = entry.mac
            newPrevious = newMAC
        }
        return newPrevious
    }
}
