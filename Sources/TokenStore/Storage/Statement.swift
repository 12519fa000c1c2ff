internal import CSQLite
import FoundationEssentials

/// A value bound to a statement parameter.
enum SQLValue {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])
}

/// A prepared statement, finalized in `deinit`.
final class Statement {
    private let handle: OpaquePointer
    private let db: OpaquePointer
    unowned let database: Database

    init(database: Database, handle db: OpaquePointer, sql: String) throws {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            let code = sqlite3_extended_errcode(db)
            let message = String(cString: sqlite3_errmsg(db))
            if code & 0xff == SQLITE_ERROR {
                // The library's own SQL fails to compile only against a schema that is not the
                // one its migrations made (a damaged sqlite_schema: "no such column", "unknown
                // function" in a CHECK): the file is not a valid store.
                throw TokenStoreError(
                    .databaseCorrupt, "The database schema is not the one this library made (preparing a statement).",
                    cause: .sqlite(extendedCode: code, message: message))
            }
            throw Database.error(code: code, message: message, context: "preparing a statement", systemErrno: sqlite3_system_errno(db))
        }
        self.handle = statement
        self.db = db
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .int(let number): rc = sqlite3_bind_int64(handle, index, number)
            case .text(let text): rc = sqlite3_bind_text(handle, index, text, -1, tokenstore_sqlite_transient())
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes {
                    sqlite3_bind_blob64(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64($0.count), tokenstore_sqlite_transient())
                }
            }
            try database.check(rc, "binding a parameter")
        }
    }

    /// Steps once: true when a row is available, false when done.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = Database.error(
                code: sqlite3_extended_errcode(db), message: String(cString: sqlite3_errmsg(db)), context: "running a statement",
                systemErrno: sqlite3_system_errno(db))
            sqlite3_reset(handle)
            throw error
        }
    }

    fileprivate var raw: OpaquePointer { handle }
}

/// The current row of a stepping statement; valid only inside the closure that lent it.
struct Row {
    fileprivate let statement: Statement

    init(statement: Statement) { self.statement = statement }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement.raw, column) == SQLITE_NULL }
    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement.raw, column) }
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement.raw, column) else { return "" }
        return String(cString: pointer)
    }
    func textOrNil(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func blob(_ column: Int32) -> [UInt8] { withBlob(column) { Array($0) } }
    /// Lends a blob column's bytes, as SQLite holds them, for the duration of `body` (valid until
    /// the statement steps or resets: do not let them escape). Empty for NULL or an empty blob.
    func withBlob<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        // The pointer first, then the size (SQLite's advice: a size asked first could be of a
        // conversion the pointer call then redoes).
        let pointer = sqlite3_column_blob(statement.raw, column)
        let count = pointer == nil ? 0 : Int(sqlite3_column_bytes(statement.raw, column))
        return try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

/// The statement cache's key: the SQL text, hashed by its length and its first and last eight
/// bytes instead of all of it (a `get` looks up four statements; hashing each whole text cost
/// more than the lookup), compared whole.
struct StatementKey: Hashable {
    let sql: String

    init(_ sql: String) { self.sql = sql }

    func hash(into hasher: inout Hasher) {
        let hashed: Void? = sql.utf8.withContiguousStorageIfAvailable { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            hasher.combine(raw.count)
            if raw.count >= 8 {
                hasher.combine(raw.loadUnaligned(as: UInt64.self))
                hasher.combine(raw.loadUnaligned(fromByteOffset: raw.count - 8, as: UInt64.self))
            } else {
                hasher.combine(bytes: raw)
            }
        }
        if hashed == nil { hasher.combine(sql) }
    }
}
