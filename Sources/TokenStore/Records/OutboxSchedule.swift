import FoundationEssentials

/// The clear columns of an outbox entry that steer its revocation — attempts, next attempt,
/// last error, failure flag — with the creation time, and their MAC: the MAC covers the table,
/// the entry id and these values, so none of them can be changed, or moved to another entry,
/// without the data key.
struct OutboxSchedule {
    var attempts: Int64
    var nextAttemptAt: Int64
    var lastError: String?
    var failedCode: String?
    let createdAt: Int64
    /// The stored MAC: nil for a row written before schema 7.
    private(set) var storedMAC: [UInt8]? = nil

    init(attempts: Int64, nextAttemptAt: Int64, lastError: String?, failedCode: String?, createdAt: Int64) {
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.failedCode = failedCode
        self.createdAt = createdAt
    }

    /// Reads attempts, next attempt, last error, failed code and created at from column
    /// `first` on, and the MAC from `macColumn`.
    init(_ row: Row, from first: Int32, macColumn: Int32) {
        self.init(
            attempts: row.int(first), nextAttemptAt: row.int(first + 1), lastError: row.textOrNil(first + 2),
            failedCode: row.textOrNil(first + 3), createdAt: row.int(first + 4))
        storedMAC = row.isNull(macColumn) ? nil : row.blob(macColumn)
    }

    func mac(entryID: [UInt8], envelope: Envelope) -> [UInt8] {
        envelope.mac(
            .outboxRowMAC,
            [MACField.name(OutboxRecord.table), entryID, MACField.int(attempts), MACField.int(nextAttemptAt),
             MACField.text(lastError), MACField.text(failedCode), MACField.int(createdAt)])
    }

    /// The schedule as it may be acted on: checked against its MAC. A row without a MAC is
    /// tampering from schema version 10 on (``RowMACBackfill``: the MAC was stripped); below it
    /// (`legacyAllowed`, a store whose open has not yet applied version 10) it is a legacy row,
    /// due at once (`now` at the latest), whatever its columns say.
    /// - Throws: `integrityCheckFailed` when the MAC does not match or is missing.
    func checked(entryID: [UInt8], envelope: Envelope, now: Int64, legacyAllowed: Bool) throws -> OutboxSchedule {
        guard let storedMAC else {
            guard legacyAllowed else {
                throw TokenStoreError(
                    .integrityCheckFailed, "A pending revocation's schedule lost its MAC: its clear columns were changed outside this library.")
            }
            var neutral = self
            neutral.nextAttemptAt = min(nextAttemptAt, now)
            neutral.attempts = max(0, attempts)
            return neutral
        }
        guard MACField.equal(storedMAC, mac(entryID: entryID, envelope: envelope)) else {
            throw TokenStoreError(
                .integrityCheckFailed, "A pending revocation's schedule was altered: it does not match its MAC.")
        }
        return self
    }

    /// Writes these values and their MAC under `envelope` into the entry's row.
    func write(_ db: Database, entryID: [UInt8], envelope: Envelope) throws {
        try db.run(
            """
            UPDATE pending_revocations SET attempts = ?, next_attempt_at = ?, last_error = ?, failed_code = ?, mac = ?
            WHERE entry_id = ?
            """,
            [.int(attempts), .int(nextAttemptAt), lastError.map(SQLValue.text) ?? .null,
             failedCode.map(SQLValue.text) ?? .null, .blob(mac(entryID: entryID, envelope: envelope)), .blob(entryID)])
    }
}
