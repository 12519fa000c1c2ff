internal import CSQLite
import Foundation

/// The ceiling: TokenStore's `items` table, pragmas and statements, with no sealing and no
/// keyed hashes (the lookup column holds the identifiers in the clear). Same connection
/// settings as `Database` in TokenStore: WAL, `synchronous=FULL`, `secure_delete=ON`,
/// `BEGIN IMMEDIATE` for every write, a read transaction around every read, cached
/// persistent statements, transient blob bindings.
final class PlaintextStore {
    private let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    let path: String
    private let keyID = [UInt8](repeating: 0xAB, count: 16)

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(path: String) throws {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX
            | SQLITE_OPEN_EXRESCODE
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            throw Failure(description: "plaintext: cannot open \(path)")
        }
        db = handle
        _ = tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_DEFENSIVE, 1)
        _ = tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        sqlite3_busy_timeout(db, 5_000)
        try execute("PRAGMA trusted_schema = OFF")
        try execute("PRAGMA secure_delete = ON")
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA cell_size_check = ON")
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = FULL")
        try execute(
            """
            CREATE TABLE IF NOT EXISTS items (
                id          INTEGER PRIMARY KEY,
                lookup      BLOB NOT NULL UNIQUE,
                account_ref BLOB NOT NULL,
                kind        INTEGER NOT NULL,
                key_id      BLOB NOT NULL,
                sealed      BLOB NOT NULL,
                created_at  INTEGER NOT NULL,
                updated_at  INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX IF NOT EXISTS items_by_account ON items(account_ref);
            """)
    }

    private var isOpen = true

    deinit { close() }

    /// Finalizes the statements and closes the connection (the last connection to close
    /// checkpoints the WAL and removes it).
    func close() {
        guard isOpen else { return }
        isOpen = false
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(db)
    }

    // MARK: Operations (the statements TokenStore runs)

    static let upsertSQL = """
        INSERT INTO items(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(lookup) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,
            updated_at = excluded.updated_at
        """
    static let selectSQL = "SELECT lookup, kind, key_id, sealed, created_at, updated_at FROM items WHERE lookup = ?"
    static let deleteSQL = "DELETE FROM items WHERE lookup = ?"
    static let listSQL = "SELECT lookup, kind, key_id, sealed, created_at, updated_at FROM items"

    func put(index: Int, value: [UInt8]) throws {
        try execute("BEGIN IMMEDIATE")
        try upsert(index: index, value: value)
        try execute("COMMIT")
    }

    /// Inserts `range` in one transaction (populating; not timed).
    func populate(_ range: Range<Int>) throws {
        try execute("BEGIN IMMEDIATE")
        for index in range { try upsert(index: index, value: Workload.token(index)) }
        try execute("COMMIT")
    }

    private func upsert(index: Int, value: [UInt8]) throws {
        let statement = try prepared(Self.upsertSQL)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try bind(statement, 1, Self.lookup(index))
        try bind(statement, 2, Array("\(Workload.service)\u{0}\(Workload.account(index))".utf8))
        sqlite3_bind_int64(statement, 3, 4)
        try bind(statement, 4, keyID)
        try bind(statement, 5, value)
        sqlite3_bind_int64(statement, 6, now)
        sqlite3_bind_int64(statement, 7, now)
        try stepToEnd(statement)
    }

    /// The value at `index`, copied out of SQLite (as TokenStore copies its blob), or nil.
    func get(lookup: [UInt8]) throws -> [UInt8]? {
        try execute("BEGIN DEFERRED")
        defer { _ = try? execute("COMMIT") }
        let statement = try prepared(Self.selectSQL)
        try bind(statement, 1, lookup)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_ROW else {
            if rc == SQLITE_DONE { return nil }
            throw Failure(description: "plaintext: select failed (\(rc))")
        }
        let lookupCount = Int(sqlite3_column_bytes(statement, 0))
        let count = Int(sqlite3_column_bytes(statement, 3))
        guard lookupCount > 0, count > 0, let pointer = sqlite3_column_blob(statement, 3) else { return nil }
        _ = sqlite3_column_int64(statement, 4)
        _ = sqlite3_column_int64(statement, 5)
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    func delete(lookup: [UInt8]) throws {
        try execute("BEGIN IMMEDIATE")
        let statement = try prepared(Self.deleteSQL)
        try bind(statement, 1, lookup)
        try stepToEnd(statement)
        try execute("COMMIT")
    }

    /// Streams every row's metadata (identifiers and the value's length); returns the count.
    func list() throws -> Int {
        try execute("BEGIN DEFERRED")
        defer { _ = try? execute("COMMIT") }
        let statement = try prepared(Self.listSQL)
        defer { sqlite3_reset(statement) }
        var count = 0
        var checksum = 0
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw Failure(description: "plaintext: list failed (\(rc))") }
            let lookupCount = Int(sqlite3_column_bytes(statement, 0))
            if let pointer = sqlite3_column_blob(statement, 0) {
                // The identifiers, as TokenStore hands them back (decoded strings).
                let name = String(decoding: UnsafeRawBufferPointer(start: pointer, count: lookupCount), as: UTF8.self)
                checksum &+= name.utf8.count
            }
            checksum &+= Int(sqlite3_column_bytes(statement, 3))
            checksum &+= Int(sqlite3_column_int64(statement, 4) & 1)
            count += 1
        }
        return checksum == 0 ? 0 : count
    }

    /// Merges the WAL into the database file (before measuring bytes on disk).
    func checkpoint() throws { try execute("PRAGMA wal_checkpoint(TRUNCATE)") }

    // MARK: Pieces

    static func lookup(_ index: Int) -> [UInt8] {
        Array("\(Workload.service)\u{0}\(Workload.account(index))\u{0}generic".utf8)
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return cached
        }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
            let statement
        else {
            throw Failure(description: "plaintext: prepare failed: \(String(cString: sqlite3_errmsg(db)))")
        }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ index: Int32, _ bytes: [UInt8]) throws {
        let rc = bytes.withUnsafeBytes {
            sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), tokenstore_sqlite_transient())
        }
        guard rc == SQLITE_OK else { throw Failure(description: "plaintext: bind failed (\(rc))") }
    }

    private func stepToEnd(_ statement: OpaquePointer) throws {
        defer { sqlite3_reset(statement) }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else {
                throw Failure(description: "plaintext: step failed: \(String(cString: sqlite3_errmsg(db)))")
            }
        }
    }

    private func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        let text = message.map { String(cString: $0) } ?? ""
        sqlite3_free(message)
        guard rc == SQLITE_OK else { throw Failure(description: "plaintext: \(text) (\(rc))") }
    }
}

/// The SQLite library actually linked.
enum SQLiteInfo {
    static var version: String { String(cString: sqlite3_libversion()) }
}
