import FoundationEssentials

/// A row of `discovery`: one authorization server's discovery document (``ServerDocument``),
/// sealed with its issuer and filed under the keyed hash of that issuer (`lookup`), so that
/// what the session reads back is exactly what it fetched, from this store.
enum DiscoveryRecord: SealedTable {
    static let table = "discovery"
    /// Public documents: nothing to erase when the last session is gone.
    static let holdsSecrets = false
    static let rotationTable = "rotation_discovery"
    /// The largest document (and supplement) kept, as the session layer's fetch limit.
    static let maximumDocumentBytes = 256 * 1024

    static func lookup(_ issuer: String, _ envelope: Envelope) -> [UInt8] {
        envelope.lookup(.discovery, [Array(issuer.utf8)])
    }

    static func tableExists(_ db: Database) throws -> Bool {
        !(try SealedTables.existing([table], in: db)).isEmpty
    }

    static func malformed() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed discovery document is missing fields.")
    }

    /// Opens a row (lookup, key_id, sealed) and checks it belongs where it was found.
    private static func open(_ row: Row, envelope: Envelope) throws -> (ServerDocument, RecordFields) {
        let lookup = row.blob(0)
        let fields = try envelope.open(row.blob(2), keyID: row.blob(1), kind: .discovery, rowKey: lookup)
        guard let issuer = fields.string(.issuer), let document = fields.bytes(.document),
            let fetchedAt = fields.int(.fetchedAt)
        else { throw malformed() }
        guard Self.lookup(issuer, envelope) == lookup else {
            throw TokenStoreError(
                .integrityCheckFailed, "A sealed discovery document does not belong to the row it was found in.")
        }
        var previous: ServerEndpoints?
        if let token = fields.string(.tokenEndpoint) {
            previous = ServerEndpoints(issuer: issuer, token: token, revocation: fields.string(.revocationEndpoint))
        }
        let found = ServerDocument(
            issuer: issuer, document: document, supplement: fields.bytes(.supplement),
            fetchedAt: Timestamp.date(fromMillis: fetchedAt), previousEndpoints: previous,
            changedAt: fields.int(.changedAt).map(Timestamp.date(fromMillis:)))
        return (found, fields)
    }

    /// The document kept for `issuer`, or nil.
    /// - Throws: `integrityCheckFailed` for a row that does not open or is not where it belongs.
    static func find(_ db: Database, issuer: String, envelope: Envelope) throws -> ServerDocument? {
        guard try tableExists(db) else { return nil }
        return try db.firstRow(
            "SELECT lookup, key_id, sealed FROM discovery WHERE lookup = ?", [.blob(lookup(issuer, envelope))]
        ) { try open($0, envelope: envelope).0 }
    }

    /// Every document kept, in no particular order.
    static func all(_ db: Database, envelope: Envelope) throws -> [ServerDocument] {
        guard try tableExists(db) else { return [] }
        var found: [ServerDocument] = []
        try db.forEachRow("SELECT lookup, key_id, sealed FROM discovery") { found.append(try open($0, envelope: envelope).0) }
        return found
    }

    /// Keeps `document` (an upsert for its issuer).
    /// - Throws: `invalidInput` for an empty or over-long document or issuer.
    static func upsert(_ db: Database, _ document: ServerDocument, envelope: Envelope) throws {
        guard !document.issuer.isEmpty, document.issuer.utf8.count <= 2048, !document.document.isEmpty,
            document.document.count <= maximumDocumentBytes, (document.supplement?.count ?? 0) <= maximumDocumentBytes
        else { throw TokenStoreError(.invalidInput, "A discovery document or its issuer is empty or too large.") }
        try document.previousEndpoints?.validate()
        var fields = RecordFields()
        fields.set(.issuer, document.issuer)
        fields.set(.document, document.document)
        if let supplement = document.supplement { fields.set(.supplement, supplement) }
        fields.set(.fetchedAt, int: Timestamp.millis(from: document.fetchedAt))
        if let previous = document.previousEndpoints {
            fields.set(.tokenEndpoint, previous.token)
            if let revocation = previous.revocation { fields.set(.revocationEndpoint, revocation) }
        }
        if let changedAt = document.changedAt { fields.set(.changedAt, int: Timestamp.millis(from: changedAt)) }
        let lookup = lookup(document.issuer, envelope)
        try db.run(
            """
            INSERT INTO discovery(lookup, key_id, sealed, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(envelope.keyID), .blob(envelope.seal(fields, kind: .discovery, rowKey: lookup)),
             .int(Timestamp.nowMillis())])
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        guard try tableExists(db) else { return }
        try db.forEachRow("SELECT lookup, key_id, sealed FROM discovery") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        guard try tableExists(db) else { return (0, nil) }
        var rows: [(issuer: String, fields: RecordFields, lookup: [UInt8], sealed: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT d.lookup, d.key_id, d.sealed FROM discovery d
            LEFT JOIN rotation_discovery r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE r.old_lookup IS NULL AND d.lookup > ? ORDER BY d.lookup LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let (document, fields) = try open(row, envelope: current)
            rows.append((document.issuer, fields, row.blob(0), row.blob(2)))
        }
        for row in rows {
            let lookup = lookup(row.issuer, next)
            try db.run(
                "INSERT OR REPLACE INTO rotation_discovery(old_lookup, old_sealed, lookup, sealed) VALUES (?, ?, ?, ?)",
                [.blob(row.lookup), .blob(row.sealed), .blob(lookup), .blob(next.seal(row.fields, kind: .discovery, rowKey: lookup))])
        }
        return (rows.count, rows.last?.lookup)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        guard try tableExists(db) else { return }
        let rows = try count(db)
        try db.run(
            """
            INSERT INTO discovery(lookup, key_id, sealed, updated_at)
            SELECT r.lookup, ?, r.sealed, d.updated_at
            FROM discovery d JOIN rotation_discovery r ON r.old_lookup = d.lookup AND r.old_sealed = d.sealed
            WHERE d.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == rows else { throw switchMismatch() }
        try db.run("DELETE FROM discovery WHERE key_id = ?", [.blob(current.keyID)])
    }
}
