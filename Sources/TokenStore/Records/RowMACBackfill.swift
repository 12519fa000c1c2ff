import FoundationEssentials

/// Gives every row without a MAC its MAC, in the open that applies schema version 10 (in the
/// same transaction as the migration, with the data key just loaded), after which a NULL MAC is
/// tampering (a stripped MAC used to pass as a "legacy" row from before schema 7).
///
/// The "done" fact is the schema version itself: the store cannot be brought back below 10
/// without changing its schema, which the open refuses (`schemaTampered`). Even a file rewritten
/// to look like version 9 again (with the columns and the ledger row removed) gains nothing from
/// the backfill: a MAC-less outbox row gets its MAC in its neutral form (no attempts, no error,
/// due at once, as such rows were read), a MAC-less logout mark in its fail-safe form (logging out,
/// finished by any of the account's entries), and a credential-history chain is re-MACed only when
/// it checks as it stands (a stripped row after an authenticated one, or a last row that is not
/// the head its state seals, stays unauthenticated and reported).
enum RowMACBackfill {
    /// The schema version from which a NULL MAC is never legacy.
    static let version = 10

    /// What one backfill did: rows given a MAC per table, and history chains left as they were
    /// (they failed their check, and stay reported).
    struct Counts: Equatable {
        var outbox = 0
        var marks = 0
        var history = 0
        var chainsLeft = 0
    }

    /// Whether a row without a MAC may still be a legacy row: the store is below version 10.
    static func legacyAllowed(_ db: Database) throws -> Bool {
        !(try KeyProviderRecord.hasColumns(db))
    }

    /// Inside the transaction that applies version 10, with the store's active key.
    @discardableResult
    static func run(_ db: Database, envelope: Envelope) throws -> Counts {
        var counts = Counts()
        let now = Timestamp.nowMillis()
        var outbox: [([UInt8], Int64, Int64)] = []
        try db.forEachRow("SELECT entry_id, next_attempt_at, created_at FROM pending_revocations WHERE mac IS NULL") {
            outbox.append(($0.blob(0), $0.int(1), $0.int(2)))
        }
        for (entryID, next, created) in outbox {
            // The clear columns were never authenticated: the neutral schedule, as they were read.
            let neutral = OutboxSchedule(attempts: 0, nextAttemptAt: min(next, now), lastError: nil, failedCode: nil, createdAt: created)
            try neutral.write(db, entryID: entryID, envelope: envelope)
            counts.outbox += 1
        }
        var marks: [[UInt8]] = []
        try db.forEachRow("SELECT account_ref FROM account_marks WHERE mac IS NULL") { marks.append($0.blob(0)) }
        for ref in marks {
            try db.run(
                "UPDATE account_marks SET logging_out = 1, logout_entry = NULL, mac = ? WHERE account_ref = ?",
                [.blob(AccountMarks.mac(ref: ref, loggingOut: true, entry: nil, envelope: envelope)), .blob(ref)])
            counts.marks += 1
        }
        try backfillHistory(db, envelope: envelope, counts: &counts)
        return counts
    }

    /// Re-MACs each chain that has a row without a MAC, when the chain checks as it stands
    /// (legacy rows only before the first authenticated one, the last row the sealed head), and
    /// reseals its state's head.
    private static func backfillHistory(_ db: Database, envelope: Envelope, counts: inout Counts) throws {
        let watermark = try CredentialHistory.resetWatermark(db)
        var refs: [[UInt8]] = []
        try db.forEachRow("SELECT DISTINCT user_ref FROM credential_history WHERE mac IS NULL AND id > ?", [.int(watermark)]) {
            refs.append($0.blob(0))
        }
        guard !refs.isEmpty else { return }
        let heads = try CredentialRecord.historyHeads(db, envelope: envelope)
        for ref in refs {
            let entries = try CredentialHistory.entries(db, ref: ref)
            let head = heads[ref] ?? nil
            guard CredentialHistory.problems(entries, ref: ref, head: head, envelope: envelope, legacyAllowed: true).isEmpty else {
                counts.chainsLeft += 1
                continue
            }
            var previous: [UInt8]?
            var macs: [(Int64, [UInt8])] = []
            for entry in entries {
                let mac = entry.expectedMAC(ref: ref, previous: previous, envelope: envelope)
                macs.append((entry.id, mac))
                previous = mac
            }
            guard let newHead = previous else { continue }
            do {
                _ = try CredentialRecord.replaceHead(db, ref: ref, head: newHead, envelope: envelope)
            } catch let error as TokenStoreError where error.code == .integrityCheckFailed {
                counts.chainsLeft += 1  // its state row does not open: left as it is, and reported
                continue
            }
            for (id, mac) in macs {
                try db.run("UPDATE credential_history SET mac = ? WHERE id = ?", [.blob(mac), .int(id)])
            }
            counts.history += entries.filter { $0.mac == nil }.count
        }
    }
}
