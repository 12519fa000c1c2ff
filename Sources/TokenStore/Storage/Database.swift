internal import CSQLite
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// One SQLite connection. Not thread-safe: the owning ``TokenStore`` serializes access.
///
/// Every return code is checked; statements are cached and finalized with the connection.
final class Database {
    private let handle: OpaquePointer
    private var statements: [StatementKey: Statement] = [:]
    let path: String
    /// The observers attached to the transaction running now (``transactionObserver(_:)``), in
    /// the order they were attached; asked before its commit, dropped at its end.
    private var observers: [any TransactionObserver] = []
    /// Work the transaction running now registered for after its commit (``afterCommit(_:)``),
    /// in order; dropped by a rollback.
    private var commitHooks: [(Database) -> Void] = []
    /// The names of the hooks registered ``afterCommit(once:_:)`` in the transaction running now.
    private var namedCommitHooks: Set<String> = []
    /// The changes the write transaction running now made that change watchers are told of
    /// (``noteChange(_:)``), in order; its owner logs them before the commit (``ChangeLog``).
    private(set) var notedChanges: [StoreChange] = []

    /// How long one statement waits on another connection's lock before SQLITE_BUSY.
    static let busyTimeoutMilliseconds: Int32 = 5_000
    /// How many times a busy `BEGIN IMMEDIATE` is retried after the busy timeout.
    static let busyRetries = 3

    /// Opens (creating if needed) the database at `path`, never following a symlink.
    /// `readOnly`: opens an existing file for reading and changes nothing in it (no journal
    /// mode switch); SQLite may still create the -wal/-shm companions it needs to read a WAL file.
    /// `vfs`: the name of a registered SQLite VFS to open through (tests inject I/O faults
    /// this way); nil for SQLite's default.
    ///
    /// Triggers and views are turned off on every connection: the schema has neither, and one
    /// planted in the file (by someone who can write it but has no key) must not run.
    convenience init(path: String, readOnly: Bool = false, vfs: String? = nil) throws {
        try self.init(path: path, readOnly: readOnly, vfs: vfs, inMemory: false)
    }

    /// Opens an existing file for reading without changing anything, side files included.
    ///
    /// A read-only WAL connection needs the -wal and -shm files and makes them when they are
    /// missing (with the database's mode, 0644 next to a 0644 file). They are missing only when
    /// no connection has the file open: the last one to close checkpointed the WAL into the
    /// database and removed both, and a rollback-journal file has none. The database file is
    /// then complete, and it is opened `immutable` (no locks, no side files). When either side
    /// file exists, someone has the store open (or crashed with it open): it is opened read-only
    /// the usual way, through the side files that are there.
    ///
    /// An immutable connection reads the file as it is: a write another process commits while
    /// it reads can make a read fail (`databaseCorrupt`, try again), never return a wrong secret
    /// (every sealed row is authenticated), and later writes are not seen.
    static func openForReading(path: String, vfs: String? = nil) throws -> Database {
        let sideFileExists = ["-wal", "-shm"].contains { suffix in
            var info = stat()
            return lstat(path + suffix, &info) == 0 || errno != ENOENT
        }
        return try Database(path: path, readOnly: true, vfs: vfs, inMemory: false, immutable: !sideFileExists)
    }

    /// Opens the existing file at `path` read-only as immutable (SQLite's `immutable=1`): no
    /// locks, no -wal or -shm created or read, nothing written. What a WAL not yet checkpointed
    /// holds is not seen; for a hint read before the real open only (``KeyProviderRecord/recorded(atPath:)``).
    static func immutable(path: String) throws -> Database {
        try Database(path: path, readOnly: true, vfs: nil, inMemory: false, immutable: true)
    }

    /// A private in-memory database with the same settings (for computing the expected schema).
    static func inMemory() throws -> Database {
        try Database(path: ":memory:", readOnly: false, vfs: nil, inMemory: true)
    }

    private init(path: String, readOnly: Bool, vfs: String?, inMemory: Bool, immutable: Bool = false) throws {
        self.path = path
        var db: OpaquePointer?
        let access = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        var flags = access | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        // `immutable` exists only as a URI parameter; URIs are turned on for this open only.
        if immutable { flags |= SQLITE_OPEN_URI }
        let name = immutable ? Self.immutableURI(path) : path
        let rc = sqlite3_open_v2(name, &db, flags, vfs)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let systemErrno = db.map { sqlite3_system_errno($0) } ?? 0
            if let db { sqlite3_close_v2(db) }
            throw Database.error(code: rc, message: message, context: "opening the database", systemErrno: systemErrno)
        }
        handle = db
        do {
            try check(tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_DEFENSIVE, 1), "enabling defensive mode")
            try check(tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0), "distrusting the schema")
            try check(tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0), "disabling extensions")
            try check(tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0), "disabling triggers")
            try check(tokenstore_sqlite_db_config_int(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0), "disabling views")
            try check(sqlite3_busy_timeout(db, Self.busyTimeoutMilliseconds), "setting busy_timeout")
            // Reading the schema first makes a file that is not a database fail here, typed.
            try execute("PRAGMA trusted_schema = OFF")
            try execute("PRAGMA cell_size_check = ON")
            if readOnly {
                _ = try scalarText("PRAGMA schema_version")  // a file that is not a database fails here
                return
            }
            try execute("PRAGMA secure_delete = ON")
            try execute("PRAGMA foreign_keys = ON")
            if inMemory { return }
            let mode = try Self.retryingBusy { try scalarText("PRAGMA journal_mode = WAL") }
            guard mode?.lowercased() == "wal" else {
                throw TokenStoreError(.ioError, "The database could not be switched to WAL mode.")
            }
            try execute("PRAGMA synchronous = FULL")
        } catch {
            statements.removeAll()
            sqlite3_close_v2(db)
            throw error
        }
    }

    /// `file:` URI of `path`, read-only and immutable; every byte but unreserved ones and `/`
    /// percent-encoded, so no character of the path is read as URI syntax.
    private static func immutableURI(_ path: String) -> String {
        let plain = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in path.utf8 {
            if plain.contains(byte) {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
            }
        }
        // An absolute path gets an empty authority ("file:///…"), so one starting with "//" is no host name.
        let encoded = String(decoding: bytes, as: UTF8.self)
        return (path.hasPrefix("/") ? "file://" : "file:") + encoded + "?mode=ro&immutable=1"
    }

    /// Retries `body` while SQLite answers busy without waiting in the busy handler (it does
    /// so, to avoid deadlocks, when two connections switch a new file to WAL at once).
    static func retryingBusy<T>(_ body: () throws -> T) throws -> T {
        var delay: useconds_t = 2_000
        for _ in 0..<40 {
            do {
                return try body()
            } catch let error as TokenStoreError where error.code == .databaseBusy {
                usleep(delay)
                delay = min(delay * 2, 100_000)
            }
        }
        return try body()
    }

    deinit {
        statements.removeAll()  // finalize before closing
        sqlite3_close_v2(handle)
    }

    // MARK: Statements

    /// A cached prepared statement for `sql`, reset and with bindings cleared.
    func statement(_ sql: String) throws -> Statement {
        if let cached = statements[StatementKey(sql)] {
            cached.reset()
            return cached
        }
        let statement = try Statement(database: self, handle: handle, sql: sql)
        statements[StatementKey(sql)] = statement
        return statement
    }

    /// Runs SQL text without results (pragmas, DDL). Values never go through here.
    func execute(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        let message = errorMessage.map { String(cString: $0) }
        sqlite3_free(errorMessage)
        guard rc == SQLITE_OK else {
            throw Database.error(
                code: sqlite3_extended_errcode(handle), message: message ?? lastMessage, context: "executing SQL",
                systemErrno: sqlite3_system_errno(handle))
        }
    }

    /// Runs `sql` with `arguments` (bound, never interpolated) and returns nothing.
    func run(_ sql: String, _ arguments: [SQLValue] = []) throws {
        let statement = try self.statement(sql)
        try statement.bind(arguments)
        while try statement.step() {}
    }

    /// Runs `sql` and hands each row to `body`.
    func forEachRow(_ sql: String, _ arguments: [SQLValue] = [], _ body: (Row) throws -> Void) throws {
        let statement = try self.statement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        while try statement.step() {
            try body(Row(statement: statement))
        }
    }

    /// The first row of `sql` mapped by `body`, or nil.
    func firstRow<T>(_ sql: String, _ arguments: [SQLValue] = [], _ body: (Row) throws -> T) throws -> T? {
        let statement = try self.statement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return try body(Row(statement: statement))
    }

    func scalarInt(_ sql: String, _ arguments: [SQLValue] = []) throws -> Int64? {
        try firstRow(sql, arguments) { $0.isNull(0) ? nil : $0.int(0) } ?? nil
    }

    func scalarText(_ sql: String, _ arguments: [SQLValue] = []) throws -> String? {
        try firstRow(sql, arguments) { $0.isNull(0) ? nil : $0.text(0) } ?? nil
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: committed when it returns, rolled
    /// back when it throws. A busy database is retried a bounded number of times.
    func writeTransaction<T>(_ body: () throws -> T) throws -> T {
        precondition(!isInTransaction, "nested write transaction")
        var attempt = 0
        while true {
            do {
                try run("BEGIN IMMEDIATE")
                break
            } catch let error as TokenStoreError where error.code == .databaseBusy && attempt < Self.busyRetries {
                attempt += 1
            }
        }
        resetTransactionState()
        defer { resetTransactionState() }
        let value: T
        do {
            value = try body()
            // Each observer may refuse the commit (a throw rolls the transaction back).
            for observer in observers { try observer.databaseWillCommit(self) }
            try run("COMMIT")
        } catch {
            if isInTransaction { try? run("ROLLBACK") }  // the original error is what matters
            throw error
        }
        // Committed: the work it registered runs now, once, in order (never after a rollback).
        let hooks = commitHooks
        resetTransactionState()
        for hook in hooks { hook(self) }
        return value
    }

    private func resetTransactionState() {
        observers = []
        commitHooks = []
        namedCommitHooks = []
        notedChanges = []
    }

    /// Inside a write transaction: `change` is one to tell change watchers of. Called by the
    /// record layer; a rollback drops it.
    func noteChange(_ change: StoreChange) {
        precondition(isInTransaction, "a change noted outside a transaction")
        notedChanges.append(change)
    }

    /// Inside a write transaction: the observer of type `O` attached to the transaction running
    /// now, made by `make` and attached at the first ask (as GRDB's `add(transactionObserver:extent:
    /// .nextTransaction)`); its state lasts until the transaction ends, and it is asked before
    /// the commit (``TransactionObserver/databaseWillCommit(_:)``).
    func transactionObserver<O: TransactionObserver>(_ make: () -> O) -> O {
        precondition(isInTransaction, "a transaction observer attached outside a transaction")
        if let attached = attachedObserver(O.self) { return attached }
        let observer = make()
        observers.append(observer)
        return observer
    }

    /// The observer of type `O` attached to the transaction running now, if any (none is attached).
    func attachedObserver<O: TransactionObserver>(_ type: O.Type) -> O? {
        for observer in observers { if let match = observer as? O { return match } }
        return nil
    }

    /// Inside a write transaction: runs `hook` once the transaction has committed (as GRDB's
    /// `afterNextTransaction(onCommit:)`); a rollback drops it. Hooks run in the order they
    /// were registered, with the transaction over; they must not throw (the change has
    /// committed: a failure is theirs to log and keep owed).
    func afterCommit(_ hook: @escaping (Database) -> Void) {
        precondition(isInTransaction, "after-commit work registered outside a transaction")
        commitHooks.append(hook)
    }

    /// As ``afterCommit(_:)``, but a hook of the same `name` registered before in this
    /// transaction wins: the work runs once however many changes ask for it.
    func afterCommit(once name: String, _ hook: @escaping (Database) -> Void) {
        guard namedCommitHooks.insert(name).inserted else { return }
        afterCommit(hook)
    }

    /// Runs `body` in a read transaction (a consistent snapshot across statements).
    /// BEGIN and COMMIT are prepared once, like every statement (cached by their text).
    func readTransaction<T>(_ body: () throws -> T) throws -> T {
        if isInTransaction { return try body() }
        try run("BEGIN DEFERRED")
        defer { if isInTransaction { try? run("COMMIT") } }  // read-only: nothing to lose
        return try body()
    }

    /// `PRAGMA data_version`: changes when another connection commits to the file, never for
    /// this connection's own commits.
    func dataVersion() throws -> Int64 {
        try scalarInt("PRAGMA data_version") ?? 0
    }

    /// SQLite's pager data version (`SQLITE_FCNTL_DATA_VERSION`): it moves at every commit to the
    /// file, this connection's own too, and inside a transaction, once a statement has read the
    /// file, it is that snapshot's. A function call where `PRAGMA data_version` is a statement
    /// (about 0.1k instructions against 2.8k). nil when SQLite does not answer.
    func pagerDataVersion() -> UInt32? {
        var version: UInt32 = 0
        return sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// Whether a connection-level option (`SQLITE_DBCONFIG_*`) is on, read back from SQLite.
    func configFlag(_ option: Int32) throws -> Bool {
        var value: Int32 = -1
        try check(tokenstore_sqlite_db_config_read(handle, option, &value), "reading a connection option")
        return value != 0
    }

    /// Moves the WAL content into the database file and truncates the WAL, so deleted
    /// secrets do not linger in the -wal file.
    ///
    /// It never waits: another connection's read transaction makes it stop where it must
    /// (the pages that reader may still need stay in the file and the WAL) and return false.
    /// - Returns: whether the WAL was checkpointed whole and truncated.
    @discardableResult
    func checkpoint() throws -> Bool {
        try check(sqlite3_busy_timeout(handle, 0), "suspending busy_timeout")
        defer { sqlite3_busy_timeout(handle, Self.busyTimeoutMilliseconds) }
        var logFrames: Int32 = 0
        var checkpointed: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, &logFrames, &checkpointed)
        if rc & 0xff == SQLITE_BUSY || rc & 0xff == SQLITE_LOCKED { return false }
        try check(rc, "checkpointing the WAL")
        return true
    }

    // MARK: Errors

    var lastMessage: String { String(cString: sqlite3_errmsg(handle)) }

    func check(_ rc: Int32, _ context: String) throws {
        guard rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW else {
            throw Database.error(
                code: sqlite3_extended_errcode(handle), message: lastMessage, context: context, systemErrno: sqlite3_system_errno(handle))
        }
    }
}

@available(*, unavailable)
extension Database: Sendable {}

/// State a write transaction carries for its owner or its records from the first ask to its end
/// (``Database/transactionObserver(_:)``), with a say before the commit (GRDB's
/// `TransactionObserver`): the storage layer knows no more of what it observes.
protocol TransactionObserver: AnyObject {
    /// Before the transaction commits: a throw refuses the commit (the transaction rolls back,
    /// no after-commit work runs).
    func databaseWillCommit(_ db: Database) throws
}
