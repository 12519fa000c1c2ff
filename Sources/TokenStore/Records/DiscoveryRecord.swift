import FoundationEssentials

/// A row of `discovery`: one authorization server's discovery document (``ServerDocument``),
/// sealed with its issuer and filed under the keyed hash of that issuer (`lookup`), so that
/// what the session reads back is exactly what it fetched, from this store.
enum DiscoveryRecord: LookupSealedTable {
    static let table = "discovery"
    static let recordKind = RecordKind.discovery
    /// Public documents: nothing to erase when the last session is gone.
    static let holdsSecrets = false
    static let rotationTable = "rotation_discovery"
    /// The largest document (and supplement) kept, as the session layer's fetch limit.
    static let maximumDocumentBytes = 256 * 1024

    static func lookup(_ issuer: String, _ envelope: Envelope) -> [UInt8] {
        envelope.lookup(.discovery, [Array(issuer.utf8)])
    }

    static func lookup(of document: ServerDocument, _ envelope: Envelope) -> [UInt8] { lookup(document.issuer, envelope) }

    static func malformed() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed discovery document is missing fields.")
    }

    /// Opens a row (lookup, key_id, sealed) and checks it belongs where it was found.
    static func open(_ row: Row, envelope: Envelope) throws -> (ServerDocument, RecordFields) {
        let lookup = row.blob(0)
        let fields = try envelope.open(row, sealed: 2, keyID: 1, kind: .discovery, rowKey: lookup)
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
        try row(db, lookup: lookup(issuer, envelope), envelope: envelope)?.0
    }

    /// Every document kept, in no particular order.
    static func all(_ db: Database, envelope: Envelope) throws -> [ServerDocument] {
        try allRows(db, envelope: envelope).map(\.0)
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
        try write(db, lookup: lookup(of: document, envelope), fields: fields, envelope: envelope)
    }
}
