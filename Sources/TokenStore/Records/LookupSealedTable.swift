/// A sealed table of the plain shape `(lookup, key_id, sealed, updated_at)`: one sealed value
/// filed under the keyed hash of what it names, with no account reference beside it
/// (`dpop_state`, `discovery`). Reading, writing, verifying and re-sealing its rows is written
/// once here; a record says how a row opens (and that it belongs where it was found) and what
/// its content's keyed hash is under a key.
protocol LookupSealedTable: SealedTable {
    /// What one row holds, as the record hands it out.
    associatedtype Content
    /// The seal's record kind (bound into the seal, so a row of another table does not open here).
    static var recordKind: RecordKind { get }

    /// Opens a row (lookup, key_id, sealed) and checks it belongs where it was found.
    /// - Throws: `integrityCheckFailed` (does not open, missing fields, or filed elsewhere).
    static func open(_ row: Row, envelope: Envelope) throws -> (Content, RecordFields)

    /// The keyed hash `content` is filed under with `envelope`'s key.
    static func lookup(of content: Content, _ envelope: Envelope) -> [UInt8]
}

extension LookupSealedTable {
    /// Whether the store's schema has the table. A store is looked at, and tests drive older
    /// libraries' schemas, before it is migrated: there every read finds nothing and a delete has
    /// nothing to do.
    static func tableExists(_ db: Database) throws -> Bool {
        !(try SealedTables.existing([table], in: db)).isEmpty
    }

    /// The row filed under `lookup`, opened, or nil.
    static func row(_ db: Database, lookup: [UInt8], envelope: Envelope) throws -> (Content, RecordFields)? {
        guard try tableExists(db) else { return nil }
        return try db.firstRow("SELECT lookup, key_id, sealed FROM \(table) WHERE lookup = ?", [.blob(lookup)]) {
            try open($0, envelope: envelope)
        }
    }

    /// Every row, opened, in no particular order.
    static func allRows(_ db: Database, envelope: Envelope) throws -> [(Content, RecordFields)] {
        guard try tableExists(db) else { return [] }
        var found: [(Content, RecordFields)] = []
        try db.forEachRow("SELECT lookup, key_id, sealed FROM \(table)") { found.append(try open($0, envelope: envelope)) }
        return found
    }

    /// Seals `fields` under `lookup` (an upsert).
    static func write(_ db: Database, lookup: [UInt8], fields: RecordFields, envelope: Envelope) throws {
        try db.run(
            """
            INSERT INTO \(table)(lookup, key_id, sealed, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(envelope.keyID), .blob(envelope.seal(fields, kind: recordKind, rowKey: lookup)),
             .int(Timestamp.nowMillis())])
    }

    /// Deletes the row filed under `lookup`; returns whether there was one.
    static func deleteRow(_ db: Database, lookup: [UInt8]) throws -> Bool {
        guard try tableExists(db) else { return false }
        try db.run("DELETE FROM \(table) WHERE lookup = ?", [.blob(lookup)])
        return db.changes > 0
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        guard try tableExists(db) else { return }
        try db.forEachRow("SELECT lookup, key_id, sealed FROM \(table)") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        guard try tableExists(db) else { return (0, nil) }
        var rows: [(content: Content, fields: RecordFields, lookup: [UInt8], sealed: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT d.lookup, d.key_id, d.sealed FROM \(table) d
            LEFT JOIN \(rotationTable) r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE r.old_lookup IS NULL AND d.lookup > ? ORDER BY d.lookup LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let (content, fields) = try open(row, envelope: current)
            rows.append((content, fields, row.blob(0), row.blob(2)))
        }
        for row in rows {
            let lookup = lookup(of: row.content, next)
            try db.run(
                "INSERT OR REPLACE INTO \(rotationTable)(old_lookup, old_sealed, lookup, sealed) VALUES (?, ?, ?, ?)",
                [.blob(row.lookup), .blob(row.sealed), .blob(lookup), .blob(next.seal(row.fields, kind: recordKind, rowKey: lookup))])
        }
        return (rows.count, rows.last?.lookup)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        guard try tableExists(db) else { return }
        let rows = try count(db)
        try db.run(
            """
            INSERT INTO \(table)(lookup, key_id, sealed, updated_at)
            SELECT r.lookup, ?, r.sealed, d.updated_at
            FROM \(table) d JOIN \(rotationTable) r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE d.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == rows else { throw switchMismatch() }
        try db.run("DELETE FROM \(table) WHERE key_id = ?", [.blob(current.keyID)])
    }
}
