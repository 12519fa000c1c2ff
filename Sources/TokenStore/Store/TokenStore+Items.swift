import Foundation

extension TokenStore {
    // MARK: Generic keychain items

    /// Stores `secret` at `key`, replacing what was there (an upsert: never a duplicate-item error).
    ///
    /// Storing a refresh token starts a new session for the account: a logout that had
    /// begun for it stays on its way (its token is already in the revocation outbox).
    /// - Throws: `invalidInput` (empty or oversize values), `databaseBusy`, `ioError`.
    public func set(_ secret: SecretBytes, for key: ItemKey, attributes: ItemAttributes = .init()) throws {
        try Self.validate(key)
        try Self.validate(secret: secret, attributes: attributes)
        try write { db in
            try upsertItem(db, key: key, secret: secret, attributes: attributes)
            if key.kind == .refreshToken {
                try clearLogoutMark(db, service: key.service, account: key.account)
            }
        }
    }

    /// The item at `key` with its secret, or `nil` when there is none.
    ///
    /// Never `nil` because of a locked keyring or a damaged row: those throw.
    /// - Throws: `integrityCheckFailed`, `databaseCorrupt`, `databaseBusy`, `storeClosed`, `invalidInput`.
    public func item(for key: ItemKey) throws -> StoredItem? {
        try Self.validate(key)
        return try read { db in try readItem(db, key: key) }
    }

    /// The secret at `key`, or `nil` when there is none. See ``item(for:)``.
    public func secret(for key: ItemKey) throws -> SecretBytes? {
        try item(for: key)?.secret
    }

    /// Deletes the item at `key`. Succeeds when there is nothing to delete.
    /// - Warning: the secret is gone for good (secure delete).
    public func delete(_ key: ItemKey) throws {
        try Self.validate(key)
        try write { db in
            try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(key))])
        }
    }

    /// Metadata of every item, without secrets. Rows are opened one at a time, so memory
    /// stays flat however large the store is.
    /// - Throws: `integrityCheckFailed` on the first row that does not open (use ``verify()`` to see them all).
    public func items() throws -> [ItemInfo] {
        var result: [ItemInfo] = []
        try forEachItem { result.append($0) }
        return result
    }

    /// Calls `body` with the metadata of each item, streaming.
    ///
    /// `body` runs inside the store's read: it must not call this store (that throws
    /// `invalidInput`). To act on items, collect their keys and act after the call returns.
    public func forEachItem(_ body: (ItemInfo) throws -> Void) throws {
        try read { db in
            try db.forEachRow("SELECT lookup, kind, key_id, sealed, created_at, updated_at FROM items") { row in
                let item = try decodeItem(row)
                try body(ItemInfo(
                    key: item.key, attributes: item.attributes, createdAt: item.createdAt, updatedAt: item.updatedAt,
                    fingerprint: item.secret.fingerprint, byteCount: item.secret.count))
            }
        }
    }

    /// The accounts that have items, with the kinds each holds.
    public func accounts() throws -> [AccountInfo] {
        var kinds: [AccountKey: Set<ItemKind>] = [:]
        try forEachItem { info in
            kinds[AccountKey(service: info.key.service, account: info.key.account), default: []].insert(info.key.kind)
        }
        return try read { db in
            try kinds.map { account, kinds in
                AccountInfo(
                    service: account.service, account: account.account, kinds: kinds,
                    isLoggingOut: try isLoggingOut(db, service: account.service, account: account.account))
            }
        }.sorted { ($0.service, $0.account) < ($1.service, $1.account) }
    }

    /// Counts of what the store holds, without opening anything.
    public func counts() throws -> StoreCounts {
        try read { db in
            StoreCounts(
                items: Int(try db.scalarInt("SELECT count(*) FROM items") ?? 0),
                accounts: Int(try db.scalarInt("SELECT count(DISTINCT account_ref) FROM items") ?? 0),
                pendingRevocations: Int(try db.scalarInt("SELECT count(*) FROM pending_revocations") ?? 0),
                credentialStates: Int(try db.scalarInt("SELECT count(*) FROM credential_states") ?? 0))
        }
    }

    // MARK: Internals shared with the session operations

    struct AccountKey: Hashable {
        let service: String
        let account: String
    }

    func upsertItem(_ db: Database, key: ItemKey, secret: SecretBytes, attributes: ItemAttributes) throws {
        let lookup = itemLookup(key)
        var fields = RecordFields()
        fields.set(.service, key.service)
        fields.set(.account, key.account)
        fields.set(.itemKind, [key.kind.code])
        if let label = attributes.label { fields.set(.label, label) }
        if let expiresAt = attributes.expiresAt { fields.set(.expiresAt, int: Timestamp.millis(from: expiresAt)) }
        if !attributes.scopes.isEmpty { fields.set(.scopes, attributes.scopes.joined(separator: " ")) }
        fields.setSecret(secret)
        let sealed = seal(fields, kind: .item, rowKey: lookup)
        let now = Timestamp.nowMillis()
        try db.run(
            """
            INSERT INTO items(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
                updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(accountRef(service: key.service, account: key.account)), .int(Int64(key.kind.code)),
             .blob(dataKey.keyID), .blob(sealed), .int(now), .int(now)])
    }

    func readItem(_ db: Database, key: ItemKey) throws -> StoredItem? {
        try db.firstRow(
            "SELECT lookup, kind, key_id, sealed, created_at, updated_at FROM items WHERE lookup = ?",
            [.blob(itemLookup(key))]) { try decodeItem($0, foundBy: key) }
    }

    /// Opens one `items` row and checks that its content matches its place: the names sealed
    /// inside must hash to the row's `lookup`. A row found by the keyed hash of `foundBy` only
    /// needs those names to equal `foundBy`'s byte for byte (equal bytes, equal hash; one keyed
    /// hash fewer per read).
    func decodeItem(_ row: Row, foundBy expected: ItemKey? = nil) throws -> StoredItem {
        let lookup = row.blob(0)
        let fields = try open(row.blob(3), keyID: row.blob(2), kind: .item, rowKey: lookup)
        guard let service = fields.string(.service), let account = fields.string(.account),
            let kindCode = fields.bytes(.itemKind), kindCode.count == 1,
            let kind = ItemKind(code: Int64(kindCode[0])), Int64(kind.code) == row.int(1),
            let secret = fields.secret
        else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed item is missing fields.")
        }
        let key = ItemKey(service: service, account: account, kind: kind)
        guard expected.map({ $0.hasSameBytes(as: key) }) ?? (itemLookup(key) == lookup) else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed item does not belong to the row it was found in.")
        }
        let attributes = ItemAttributes(
            label: fields.string(.label),
            expiresAt: fields.int(.expiresAt).map(Timestamp.date(fromMillis:)),
            scopes: fields.string(.scopes).map { $0.split(separator: " ").map(String.init) } ?? [])
        return StoredItem(
            key: key, secret: secret, attributes: attributes,
            createdAt: Timestamp.date(fromMillis: row.int(4)), updatedAt: Timestamp.date(fromMillis: row.int(5)))
    }

    // MARK: Validation

    static func validate(_ key: ItemKey) throws {
        for (name, value) in [("service", key.service), ("account", key.account)] {
            guard !value.isEmpty else { throw TokenStoreError(.invalidInput, "The \(name) name is empty.") }
            guard value.utf8.count <= StoreLimits.maxIdentifierBytes else {
                throw TokenStoreError(.invalidInput, "The \(name) name is longer than \(StoreLimits.maxIdentifierBytes) bytes.")
            }
        }
    }

    static func validate(date: Date, what: String) throws {
        // Date's <= is !(>), true for NaN: test the number itself.
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, StoreLimits.dates.contains(date) else {
            throw TokenStoreError(.invalidInput, "The \(what) date is outside the years 1–9999.")
        }
    }

    static func validate(secret: SecretBytes, attributes: ItemAttributes) throws {
        guard secret.count > 0 else { throw TokenStoreError(.invalidInput, "The secret is empty.") }
        guard secret.count <= StoreLimits.maxSecretBytes else {
            throw TokenStoreError(.invalidInput, "The secret is larger than \(StoreLimits.maxSecretBytes) bytes.")
        }
        if let label = attributes.label, label.utf8.count > StoreLimits.maxLabelBytes {
            throw TokenStoreError(.invalidInput, "The label is longer than \(StoreLimits.maxLabelBytes) bytes.")
        }
        if let expiresAt = attributes.expiresAt { try validate(date: expiresAt, what: "expiry") }
        guard attributes.scopes.count <= StoreLimits.maxScopes else {
            throw TokenStoreError(.invalidInput, "More than \(StoreLimits.maxScopes) scopes.")
        }
        for scope in attributes.scopes where scope.isEmpty || scope.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) || scope.utf8.count > 256 {
            throw TokenStoreError(.invalidInput, "A scope is empty, too long, or holds whitespace or control characters.")
        }
    }
}

/// Counts of what a store holds (no secrets, no identifiers).
public struct StoreCounts: Sendable, Equatable {
    public let items: Int
    public let accounts: Int
    public let pendingRevocations: Int
    public let credentialStates: Int
}
