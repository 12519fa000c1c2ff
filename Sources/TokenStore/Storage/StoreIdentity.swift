import FoundationEssentials

/// Tells a TokenStore store from another program's database before anything writes to it.
///
/// A store made at schema version 11 or later has `PRAGMA application_id` set to
/// ``applicationID`` (ASCII "TkSt"); an older one is known by its own tables
/// (`schema_migrations`, `store_info`), and gets the id when migrated. A database with an empty
/// schema and no application id (a file SQLite just made) may still become a store. Anything
/// else is `notAStore`: the open stops before it creates, migrates or chmods anything.
enum StoreIdentity {
    /// `PRAGMA application_id` of a TokenStore store: 0x546B5374, ASCII "TkSt" (set by migration 0011).
    static let applicationID: Int64 = 0x546B_5374

    /// What `db` holds, as far as telling stores apart goes.
    enum Verdict: Equatable {
        /// A TokenStore store (by its application id or its tables).
        case store
        /// A database with nothing in it yet: a writing open may make it a store.
        case emptyDatabase
        /// Another program's database.
        case foreign
    }

    /// Classifies the database open on `db` (any connection; only reads).
    /// - Throws: `databaseCorrupt` (not an SQLite database), `ioError`.
    static func verdict(_ db: Database) throws -> Verdict {
        let id = try db.scalarInt("PRAGMA application_id") ?? 0
        if id == applicationID { return .store }
        let ours = try db.scalarInt(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('schema_migrations', 'store_info')") ?? 0
        // Its tables make it a store whatever the id says (a damaged header byte is not "another program").
        if ours > 0 { return .store }
        let objects = try db.scalarInt("SELECT count(*) FROM sqlite_schema") ?? 0
        if id == 0, objects == 0 { return .emptyDatabase }
        return .foreign
    }

    /// Throws `notAStore` unless the existing, non-empty file at `path` is a store or an empty
    /// database, reading it through a read-only connection (``Database/openForReading(path:vfs:)``)
    /// that writes nothing and adds no side file. A file that is not an SQLite database is
    /// `databaseCorrupt`, with a hint that fits a mistyped path as well as a damaged store.
    /// - Returns: the verdict (`.store` or `.emptyDatabase`).
    @discardableResult
    static func check(path: String, vfs: String? = nil) throws -> Verdict {
        try checkedConnection(path: path, vfs: vfs).verdict
    }

    /// As ``check(path:vfs:)``, and the read-only connection it checked the file on, for the
    /// open to read on (a read-only open reads the store on it; a writing open reads the
    /// recorded key provider on it, then closes it): one connection and one parse of the schema
    /// instead of one per look.
    static func checkedConnection(path: String, vfs: String? = nil) throws -> (db: Database, verdict: Verdict) {
        let db: Database
        let verdict: Verdict
        do {
            db = try Database.openForReading(path: path, vfs: vfs)
            verdict = try db.readTransaction { try Self.verdict(db) }
        } catch let error as TokenStoreError where error.code == .databaseCorrupt {
            throw TokenStoreError(
                .databaseCorrupt, "The file at the store path is not an SQLite database, or it is damaged.",
                hint: "Check the store path. If it names the store, restore the store file from a backup.", cause: error.cause)
        }
        guard verdict != .foreign else { throw notAStoreError }
        return (db, verdict)
    }

    /// The refusal of another program's database.
    static let notAStoreError = TokenStoreError(
        .notAStore,
        "The file at the store path is an SQLite database, but not a TokenStore store (it has neither TokenStore's "
            + "application id nor its tables); it was left unchanged.",
        hint: "Check the store path: it names another program's database.")
}
