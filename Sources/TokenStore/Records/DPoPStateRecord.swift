import FoundationEssentials

/// A row of `dpop_state`: one DPoP entry (RFC 9449) of the store, sealed with what it names
/// and filed under the keyed hash of that name (`lookup`), so nothing of it is readable in the
/// file: the store's key, a server's latest nonce, or the thumbprint an account is bound to.
enum DPoPStateRecord: SealedTable {
    static let table = "dpop_state"
    /// The key is a secret, but it outlives every session (one key per store): a store whose
    /// last session is gone has nothing left to erase for it.
    static let holdsSecrets = false
    static let rotationTable = "rotation_dpop_state"

    /// What a row names.
    enum Entry: Equatable {
        /// The store's one DPoP key (its material, opaque, with its residence).
        case key
        /// The latest `DPoP-Nonce` of a server origin (`scheme://host[:port]`).
        case nonce(origin: String)
        /// The thumbprint `account`'s refresh token is bound to.
        case binding(AccountID)

        var code: UInt8 {
            switch self {
            case .key: return 1
            case .nonce: return 2
            case .binding: return 3
            }
        }

        var nameParts: [[UInt8]] {
            switch self {
            case .key: return []
            case .nonce(let origin): return [Array(origin.utf8)]
            case .binding(let account): return [Array(account.service.utf8), Array(account.name.utf8)]
            }
        }

        func lookup(_ envelope: Envelope) -> [UInt8] { envelope.lookup(.dpop, [[code]] + nameParts) }

        func fields(secret: SecretBytes, residence: String?) -> RecordFields {
            var fields = RecordFields()
            fields.set(.dpopEntry, [code])
            switch self {
            case .key: break
            case .nonce(let origin): fields.set(.dpopName, origin)
            case .binding(let account):
                fields.set(.service, account.service)
                fields.set(.account, account.name)
            }
            if let residence { fields.set(.dpopResidence, residence) }
            fields.setSecret(secret)
            return fields
        }

        init(_ fields: RecordFields) throws {
            switch fields.bytes(.dpopEntry) {
            case [1]?: self = .key
            case [2]?:
                guard let origin = fields.string(.dpopName) else { throw DPoPStateRecord.malformed() }
                self = .nonce(origin: origin)
            case [3]?:
                guard let service = fields.string(.service), let name = fields.string(.account) else {
                    throw DPoPStateRecord.malformed()
                }
                self = .binding(AccountID(name, service: service))
            default: throw DPoPStateRecord.malformed()
            }
        }
    }

    /// Whether the store's schema has the table (version 12 on). A store is looked at, and
    /// tests drive older libraries' schemas, before it is migrated: there every read finds
    /// nothing and a delete has nothing to do.
    static func tableExists(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'dpop_state'") ?? 0) > 0
    }

    static func malformed() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed DPoP entry is missing fields.")
    }

    /// Opens a row (lookup, key_id, sealed) and checks it belongs where it was found.
    private static func open(_ row: Row, envelope: Envelope) throws -> (Entry, RecordFields) {
        let lookup = row.blob(0)
        let fields = try envelope.open(row.blob(2), keyID: row.blob(1), kind: .dpop, rowKey: lookup)
        let entry = try Entry(fields)
        guard fields.secret != nil else { throw malformed() }
        guard entry.lookup(envelope) == lookup else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed DPoP entry does not belong to the row it was found in.")
        }
        return (entry, fields)
    }

    /// The secret and residence tag stored for `entry`, or nil.
    static func find(_ db: Database, _ entry: Entry, envelope: Envelope) throws -> (secret: SecretBytes, residence: String?)? {
        guard try tableExists(db) else { return nil }
        return try db.firstRow("SELECT lookup, key_id, sealed FROM dpop_state WHERE lookup = ?", [.blob(entry.lookup(envelope))]) {
            let (found, fields) = try open($0, envelope: envelope)
            guard found == entry, let secret = fields.secret else { throw malformed() }
            return (secret, fields.string(.dpopResidence))
        }
    }

    /// Stores `secret` for `entry` (an upsert).
    static func upsert(_ db: Database, _ entry: Entry, secret: SecretBytes, residence: String? = nil, envelope: Envelope) throws {
        let lookup = entry.lookup(envelope)
        try db.run(
            """
            INSERT INTO dpop_state(lookup, key_id, sealed, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(envelope.keyID),
             .blob(envelope.seal(entry.fields(secret: secret, residence: residence), kind: .dpop, rowKey: lookup)),
             .int(Timestamp.nowMillis())])
    }

    /// Deletes `entry`'s row; returns whether there was one.
    @discardableResult
    static func delete(_ db: Database, _ entry: Entry, envelope: Envelope) throws -> Bool {
        guard try tableExists(db) else { return false }
        try db.run("DELETE FROM dpop_state WHERE lookup = ?", [.blob(entry.lookup(envelope))])
        return db.changes > 0
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        guard try tableExists(db) else { return }
        try db.forEachRow("SELECT lookup, key_id, sealed FROM dpop_state") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        guard try tableExists(db) else { return (0, nil) }
        var rows: [(entry: Entry, fields: RecordFields, lookup: [UInt8], sealed: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT d.lookup, d.key_id, d.sealed FROM dpop_state d
            LEFT JOIN rotation_dpop_state r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE r.old_lookup IS NULL AND d.lookup > ? ORDER BY d.lookup LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let (entry, fields) = try open(row, envelope: current)
            rows.append((entry, fields, row.blob(0), row.blob(2)))
        }
        for row in rows {
            let lookup = row.entry.lookup(next)
            try db.run(
                "INSERT OR REPLACE INTO rotation_dpop_state(old_lookup, old_sealed, lookup, sealed) VALUES (?, ?, ?, ?)",
                [.blob(row.lookup), .blob(row.sealed), .blob(lookup), .blob(next.seal(row.fields, kind: .dpop, rowKey: lookup))])
        }
        return (rows.count, rows.last?.lookup)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        guard try tableExists(db) else { return }
        let rows = try count(db)
        try db.run(
            """
            INSERT INTO dpop_state(lookup, key_id, sealed, updated_at)
            SELECT r.lookup, ?, r.sealed, d.updated_at
            FROM dpop_state d JOIN rotation_dpop_state r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE d.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == rows else { throw switchMismatch() }
        try db.run("DELETE FROM dpop_state WHERE key_id = ?", [.blob(current.keyID)])
    }
}
