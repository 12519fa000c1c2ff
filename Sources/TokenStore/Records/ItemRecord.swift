import FoundationEssentials

/// A row of `items`: the sealed names, secret and attributes of one ``ItemKey``, filed under
/// the keyed hash of that key (`lookup`) and of its account (`account_ref`).
struct ItemRecord: SealedTable {
    static let table = "items"
    static let holdsSecrets = true
    static let rotationTable = "rotation_items"
    /// The columns ``init(row:envelope:foundBy:checkAccountRef:)`` reads, in order.
    static let columns = "lookup, kind, key_id, sealed, created_at, updated_at, account_ref"

    let key: ItemKey
    let secret: SecretBytes
    let attributes: ItemAttributes
    let createdAt: Date
    let updatedAt: Date
    /// The endpoints a refresh token is bound to (``ServerEndpoints``); `nil` for other kinds.
    let endpoints: ServerEndpoints?
    /// The opened fields, re-sealed as they are by a key rotation.
    private let fields: RecordFields

    /// The item with its secret; its fingerprint is keyed under `envelope`'s fingerprint subkey.
    func stored(_ envelope: Envelope) -> StoredItem {
        StoredItem(
            key: key, secret: secret, attributes: attributes, createdAt: createdAt, updatedAt: updatedAt,
            fingerprint: envelope.fingerprint(secret))
    }

    /// The item's metadata; its fingerprint is keyed under `envelope`'s fingerprint subkey.
    func info(_ envelope: Envelope) -> ItemInfo {
        ItemInfo(
            key: key, attributes: attributes, createdAt: createdAt, updatedAt: updatedAt,
            fingerprint: envelope.fingerprint(secret), byteCount: secret.count)
    }

    /// Opens one row of ``columns`` and checks that its content matches its place: the names
    /// sealed inside must hash to the row's `lookup`. A row found by the keyed hash of
    /// `foundBy` only needs those names to equal `foundBy`'s byte for byte (equal bytes, equal
    /// hash; one keyed hash fewer per read). `checkAccountRef` also checks `account_ref`, which
    /// is outside the seal (verification and rotation; a changed one would steer account-wide queries).
    init(row: Row, envelope: Envelope, foundBy expected: ItemKey? = nil, checkAccountRef: Bool = false) throws {
        let lookup = row.blob(0)
        let fields = try envelope.open(row, sealed: 3, keyID: 2, kind: .item, rowKey: lookup)
        guard let service = fields.bytes(.service), let account = fields.bytes(.account),
            let kindCode = fields.bytes(.itemKind), kindCode.count == 1,
            let kind = ItemKind(code: Int64(kindCode[0])), Int64(kind.code) == row.int(1),
            let secret = fields.secret
        else {
            throw Self.missingFields()
        }
        let key: ItemKey
        if let expected {
            guard service.withUnsafeBytes({ service in account.withUnsafeBytes { Self.names(service, $0, kind, are: expected) } })
            else { throw Self.misplaced() }
            key = expected
        } else {
            key = ItemKey(
                account: AccountID(String(decoding: account, as: UTF8.self), service: String(decoding: service, as: UTF8.self)),
                kind: kind)
            guard envelope.itemLookup(key) == lookup else { throw Self.misplaced() }
        }
        if checkAccountRef, envelope.accountRef(key.account) != row.blob(6) {
            throw TokenStoreError(.integrityCheckFailed, "An item's account reference does not match its sealed names.")
        }
        self.key = key
        self.secret = secret
        self.fields = fields
        endpoints = ServerEndpoints(fields)
        attributes = ItemAttributes(
            label: fields.string(.label),
            expiresAt: fields.int(.expiresAt).map(Timestamp.date(fromMillis:)),
            scopes: fields.string(.scopes).map { $0.split(separator: " ").map(String.init) } ?? [])
        createdAt = Timestamp.date(fromMillis: row.int(4))
        updatedAt = Timestamp.date(fromMillis: row.int(5))
    }

    /// Whether the names and kind sealed in a row found by the keyed hash of `expected` are
    /// `expected`'s, byte for byte (equal bytes, equal hash: no second keyed hash is needed).
    private static func names(_ service: UnsafeRawBufferPointer, _ account: UnsafeRawBufferPointer, _ kind: ItemKind, are expected: ItemKey) -> Bool {
        kind == expected.kind && UTF8Bytes.equal(service, expected.account.service) && UTF8Bytes.equal(account, expected.account.name)
    }

    static func missingFields() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed item is missing fields.")
    }

    static func misplaced() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed item does not belong to the row it was found in.")
    }

    // MARK: Reading and writing

    /// The item at `key`, or nil.
    static func find(_ db: Database, _ key: ItemKey, envelope: Envelope) throws -> ItemRecord? {
        try db.firstRow("SELECT \(columns) FROM items WHERE lookup = ?", [.blob(envelope.itemLookup(key))]) {
            try ItemRecord(row: $0, envelope: envelope, foundBy: key)
        }
    }

    /// The secret at `key`, or nil: ``find(_:_:envelope:)``'s secret, after the same checks (the
    /// row's key id is the envelope's, the seal is bound to the row, the sealed names and kind
    /// are `key`'s, the kind column agrees), read in place: the sealed column is opened from
    /// SQLite's buffer and the record walked, its other fields neither copied nor decoded. The
    /// `get` path (about a sixth of its instructions were those copies and decodings).
    static func secret(_ db: Database, _ key: ItemKey, envelope: Envelope) throws -> SecretBytes? {
        let lookup = envelope.itemLookup(key)
        return try db.firstRow("SELECT kind, key_id, sealed FROM items WHERE lookup = ?", [.blob(lookup)]) { row in
            let plaintext = try envelope.openPlaintext(row, sealed: 2, keyID: 1, kind: .item, rowKey: lookup)
            return try plaintext.withUnsafeBytes { record throws -> SecretBytes in
                var service: UnsafeRawBufferPointer?
                var account: UnsafeRawBufferPointer?
                var kindCode: UnsafeRawBufferPointer?
                var secret: SecretBytes?
                try RecordFields.forEachField(in: record) { tag, offset, body in
                    switch RecordFields.Tag(rawValue: tag) {
                    case .service: service = body
                    case .account: account = body
                    case .itemKind: kindCode = body
                    case .secret: secret = SecretBytes(sharing: plaintext, offset: offset, count: body.count)
                    default: break
                    }
                }
                guard let service, let account, let kindCode, kindCode.count == 1,
                    let kind = ItemKind(code: Int64(kindCode[0])), Int64(kind.code) == row.int(0), let secret
                else { throw missingFields() }
                guard names(service, account, kind, are: key) else { throw misplaced() }
                return secret
            }
        }
    }

    /// Whether an item is stored at `key` (its row is found by the keyed hash; nothing is opened).
    static func exists(_ db: Database, _ key: ItemKey, envelope: Envelope) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM items WHERE lookup = ?", [.blob(envelope.itemLookup(key))]) ?? 0) > 0
    }

    /// The secret at `key` as a string (an Apple user id), or nil.
    static func string(_ db: Database, _ key: ItemKey, envelope: Envelope) throws -> String? {
        try secret(db, key, envelope: envelope)?.stringValue()
    }

    /// Calls `body` with each item (all of them, or those of `kind`), streaming.
    static func forEach(
        _ db: Database, kind: ItemKind? = nil, envelope: Envelope, _ body: (ItemRecord) throws -> Void
    ) throws {
        let filter = kind.map { _ in " WHERE kind = ?" } ?? ""
        try db.forEachRow("SELECT \(columns) FROM items\(filter)", kind.map { [.int(Int64($0.code))] } ?? []) {
            try body(try ItemRecord(row: $0, envelope: envelope))
        }
    }

    /// Stores `secret` at `key` (an upsert), sealed under `envelope`, with the server
    /// `endpoints` a refresh token is bound to.
    static func upsert(
        _ db: Database, _ key: ItemKey, secret: SecretBytes, attributes: ItemAttributes = .init(),
        endpoints: ServerEndpoints? = nil, envelope: Envelope
    ) throws {
        let lookup = envelope.itemLookup(key)
        var fields = RecordFields()
        fields.set(.service, key.account.service)
        fields.set(.account, key.account.name)
        fields.set(.itemKind, [key.kind.code])
        if let label = attributes.label { fields.set(.label, label) }
        if let expiresAt = attributes.expiresAt { fields.set(.expiresAt, int: Timestamp.millis(from: expiresAt)) }
        if !attributes.scopes.isEmpty { fields.set(.scopes, attributes.scopes.joined(separator: " ")) }
        if let endpoints {
            try endpoints.validate()
            endpoints.add(to: &fields)
        }
        fields.setSecret(secret)
        // An account whose refresh token this adds is signed in from now on (``StoreChange``).
        if key.kind == .refreshToken, try !exists(db, key, envelope: envelope) { db.noteChange(.accountAdded(key.account)) }
        let now = Timestamp.nowMillis()
        try db.run(
            """
            INSERT INTO items(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
                updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(envelope.accountRef(key.account)),
             .int(Int64(key.kind.code)), .blob(envelope.keyID), .blob(envelope.seal(fields, kind: .item, rowKey: lookup)),
             .int(now), .int(now)])
    }

    /// Deletes the item at `key`; returns whether there was one.
    @discardableResult
    static func delete(_ db: Database, _ key: ItemKey, envelope: Envelope) throws -> Bool {
        try db.run("DELETE FROM items WHERE lookup = ?", [.blob(envelope.itemLookup(key))])
        let deleted = db.changes > 0
        if deleted, key.kind == .refreshToken { db.noteChange(.accountRemoved(key.account)) }
        return deleted
    }

    /// Whether the account has any item, found by the items' lookups (not by `account_ref`,
    /// which is outside the seal: a changed one must not hide an account's items).
    static func accountHasItems(_ db: Database, _ account: AccountID, envelope: Envelope) throws -> Bool {
        let lookups = ItemKind.allCases.map { SQLValue.blob(envelope.itemLookup(ItemKey(account: account, kind: $0))) }
        let marks = lookups.map { _ in "?" }.joined(separator: ", ")
        return (try db.scalarInt("SELECT count(*) FROM items WHERE lookup IN (\(marks))", lookups) ?? 0) > 0
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        try db.forEachRow("SELECT \(columns) FROM items") { row in
            check(row.blob(0)) { _ = try ItemRecord(row: row, envelope: envelope, checkAccountRef: true) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        var rows: [(item: ItemRecord, lookup: [UInt8], sealed: [UInt8], ref: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT i.lookup, i.kind, i.key_id, i.sealed, i.created_at, i.updated_at, i.account_ref FROM items i
            LEFT JOIN rotation_items r ON r.old_lookup = i.lookup AND r.old_sealed = i.sealed
            WHERE r.old_lookup IS NULL AND i.lookup > ? ORDER BY i.lookup LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            rows.append((try ItemRecord(row: row, envelope: current, checkAccountRef: true), row.blob(0), row.blob(3), row.blob(6)))
        }
        for row in rows {
            let key = row.item.key
            let lookup = next.itemLookup(key)
            let newRef = next.accountRef(key.account)
            try db.run(
                "INSERT OR REPLACE INTO rotation_items(old_lookup, old_sealed, lookup, account_ref, sealed) VALUES (?, ?, ?, ?, ?)",
                [.blob(row.lookup), .blob(row.sealed), .blob(lookup), .blob(newRef),
                 .blob(next.seal(row.item.fields, kind: .item, rowKey: lookup))])
            try mapRef(db, .account, from: row.ref, to: newRef)
        }
        return (rows.count, rows.last?.lookup)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        let items = try count(db)
        try db.run(
            """
            INSERT INTO items(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
            SELECT r.lookup, r.account_ref, i.kind, ?, r.sealed, i.created_at, i.updated_at
            FROM items i JOIN rotation_items r ON r.old_lookup = i.lookup AND r.old_sealed = i.sealed
            WHERE i.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == items else { throw switchMismatch() }
        try db.run("DELETE FROM items WHERE key_id = ?", [.blob(current.keyID)])
    }
}
