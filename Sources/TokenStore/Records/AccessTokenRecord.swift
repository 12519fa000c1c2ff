import FoundationEssentials

/// A row of `access_tokens`: one cached access token of an account for one audience and scope
/// set, sealed with the account's names, the audience, the scopes (asked, granted, declined)
/// and the expiry; filed under the keyed hash of its ``AccessTokenKey`` (`lookup`) and of its
/// account (`account_ref`).
///
/// A cache, bounded: at most ``maximumPerAccount`` rows per account; storing one more evicts
/// the account's least recently stored row.
enum AccessTokenRecord: SealedTable {
    static let table = "access_tokens"
    static let holdsSecrets = true
    static let rotationTable = "rotation_access_tokens"
    /// The most access tokens cached per account (audiences × scope sets). Sixteen covers an
    /// app with several APIs, each asked with a couple of scope sets; more is a sign of scope
    /// sets built per call, which the cache should not grow with.
    static let maximumPerAccount = 16
    private static let columns = "lookup, key_id, sealed, created_at, updated_at, account_ref"

    /// Opens one row of ``columns`` and checks that it belongs where it is (its sealed key
    /// hashes to `lookup`, its account to `account_ref`).
    private static func open(_ row: Row, envelope: Envelope) throws -> (CachedAccessToken, RecordFields) {
        let lookup = row.blob(0)
        let fields = try envelope.open(row, sealed: 2, keyID: 1, kind: .accessToken, rowKey: lookup)
        guard let service = fields.string(.service), let name = fields.string(.account),
            let scopeSet = fields.string(.requestedScopes), let granted = fields.string(.scopes),
            let expiresAt = fields.int(.expiresAt), let token = fields.secret
        else { throw TokenStoreError(.integrityCheckFailed, "A cached access token is missing fields.") }
        let account = AccountID(name, service: service)
        let key = AccessTokenKey(
            account: account, audience: fields.string(.audience), scopes: Self.split(scopeSet))
        guard envelope.accessTokenLookup(key) == lookup, envelope.accountRef(account) == row.blob(5) else {
            throw TokenStoreError(.integrityCheckFailed, "A cached access token does not belong to the row it was found in.")
        }
        let entry = AccessTokenEntry(
            token: token, expiresAt: Timestamp.date(fromMillis: expiresAt), scopes: Self.split(granted),
            declinedScopes: Self.split(fields.string(.declinedScopes) ?? ""), tokenType: fields.string(.tokenType))
        return (CachedAccessToken(key: key, entry: entry, updatedAt: Timestamp.date(fromMillis: row.int(4))), fields)
    }

    private static func split(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }

    // MARK: Reading and writing

    /// The token cached at `key`, or nil.
    static func find(_ db: Database, _ key: AccessTokenKey, envelope: Envelope) throws -> CachedAccessToken? {
        try db.firstRow("SELECT \(columns) FROM access_tokens WHERE lookup = ?", [.blob(envelope.accessTokenLookup(key))]) {
            try open($0, envelope: envelope).0
        }
    }

    /// The account's cached tokens, most recently stored first.
    static func all(_ db: Database, of account: AccountID, envelope: Envelope) throws -> [CachedAccessToken] {
        var found: [CachedAccessToken] = []
        try db.forEachRow(
            "SELECT \(columns) FROM access_tokens WHERE account_ref = ? ORDER BY updated_at DESC, id DESC",
            [.blob(envelope.accountRef(account))]
        ) { row in
            let token = try open(row, envelope: envelope).0
            if token.key.account.hasSameBytes(as: account) { found.append(token) }
        }
        return found
    }

    /// Stores `entry` at `key` (replacing what was there), then evicts the account's least
    /// recently stored tokens beyond ``maximumPerAccount``.
    static func upsert(_ db: Database, _ key: AccessTokenKey, _ entry: AccessTokenEntry, envelope: Envelope) throws {
        let lookup = envelope.accessTokenLookup(key)
        var fields = RecordFields()
        fields.set(.service, key.account.service)
        fields.set(.account, key.account.name)
        if let audience = key.audience { fields.set(.audience, audience) }
        fields.set(.requestedScopes, key.scopeSet)
        fields.set(.scopes, entry.scopes.joined(separator: " "))
        fields.set(.declinedScopes, entry.declinedScopes.joined(separator: " "))
        fields.set(.expiresAt, int: Timestamp.millis(from: entry.expiresAt))
        if let tokenType = entry.tokenType { fields.set(.tokenType, tokenType) }
        fields.setSecret(entry.token)
        let now = Timestamp.nowMillis()
        let accountRef = envelope.accountRef(key.account)
        try db.run(
            """
            INSERT INTO access_tokens(lookup, account_ref, key_id, sealed, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(lookup) DO UPDATE SET
                account_ref = excluded.account_ref, key_id = excluded.key_id, sealed = excluded.sealed,
                updated_at = excluded.updated_at
            """,
            [.blob(lookup), .blob(accountRef), .blob(envelope.keyID),
             .blob(envelope.seal(fields, kind: .accessToken, rowKey: lookup)), .int(now), .int(now)])
        try db.run(
            """
            DELETE FROM access_tokens WHERE id IN (
                SELECT id FROM access_tokens WHERE account_ref = ? ORDER BY updated_at DESC, id DESC LIMIT -1 OFFSET ?)
            """, [.blob(accountRef), .int(Int64(maximumPerAccount))])
    }

    /// Deletes the token at `key`; returns whether there was one.
    @discardableResult
    static func delete(_ db: Database, _ key: AccessTokenKey, envelope: Envelope) throws -> Bool {
        try db.run("DELETE FROM access_tokens WHERE lookup = ?", [.blob(envelope.accessTokenLookup(key))])
        return db.changes > 0
    }

    /// Deletes every cached token of `account`: those filed under its `account_ref`, and any
    /// row whose sealed names are the account's although its `account_ref` (outside the seal)
    /// was changed, so that a logout cannot leave one behind. Rows that do not open are left
    /// for ``TokenStore/verify(progress:)`` to report.
    /// - Returns: whether a row was deleted.
    @discardableResult
    static func deleteAll(_ db: Database, of account: AccountID, envelope: Envelope) throws -> Bool {
        try db.run("DELETE FROM access_tokens WHERE account_ref = ?", [.blob(envelope.accountRef(account))])
        var deleted = db.changes > 0
        var strays: [[UInt8]] = []
        try db.forEachRow("SELECT \(columns) FROM access_tokens") { row in
            guard let fields = try? envelope.open(row, sealed: 2, keyID: 1, kind: .accessToken, rowKey: row.blob(0)),
                let service = fields.string(.service), let name = fields.string(.account),
                AccountID(name, service: service).hasSameBytes(as: account)
            else { return }
            strays.append(row.blob(0))
        }
        for lookup in strays {
            try db.run("DELETE FROM access_tokens WHERE lookup = ?", [.blob(lookup)])
            if db.changes > 0 { deleted = true }
        }
        return deleted
    }

    // MARK: SealedTable

    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws {
        try db.forEachRow("SELECT \(columns) FROM access_tokens") { row in
            check(row.blob(0)) { _ = try open(row, envelope: envelope) }
        }
    }

    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?) {
        var rows: [(token: CachedAccessToken, fields: RecordFields, lookup: [UInt8], sealed: [UInt8], ref: [UInt8])] = []
        try db.forEachRow(
            """
            SELECT a.lookup, a.key_id, a.sealed, a.created_at, a.updated_at, a.account_ref FROM access_tokens a
            LEFT JOIN rotation_access_tokens r ON r.old_lookup = a.lookup AND r.old_sealed = a.sealed
            WHERE r.old_lookup IS NULL AND a.lookup > ? ORDER BY a.lookup LIMIT ?
            """, [.blob(cursor), .int(Int64(limit))]
        ) { row in
            let opened = try open(row, envelope: current)
            rows.append((opened.0, opened.1, row.blob(0), row.blob(2), row.blob(5)))
        }
        for row in rows {
            let lookup = next.accessTokenLookup(row.token.key)
            let newRef = next.accountRef(row.token.key.account)
            try db.run(
                """
                INSERT OR REPLACE INTO rotation_access_tokens(old_lookup, old_sealed, lookup, account_ref, sealed)
                VALUES (?, ?, ?, ?, ?)
                """,
                [.blob(row.lookup), .blob(row.sealed), .blob(lookup), .blob(newRef),
                 .blob(next.seal(row.fields, kind: .accessToken, rowKey: lookup))])
            try mapRef(db, .account, from: row.ref, to: newRef)
        }
        return (rows.count, rows.last?.lookup)
    }

    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws {
        let rows = try count(db)
        try db.run(
            """
            INSERT INTO access_tokens(lookup, account_ref, key_id, sealed, created_at, updated_at)
            SELECT r.lookup, r.account_ref, ?, r.sealed, a.created_at, a.updated_at
            FROM access_tokens a JOIN rotation_access_tokens r ON r.old_lookup = a.lookup AND r.old_sealed = a.sealed
            WHERE a.key_id = ?
            """, [.blob(next.keyID), .blob(current.keyID)])
        guard db.changes == rows else { throw switchMismatch() }
        try db.run("DELETE FROM access_tokens WHERE key_id = ?", [.blob(current.keyID)])
    }
}
