import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// An encrypted keychain for one app: items sealed in SQLite under a data key kept by a
/// ``KeyProvider`` (the Secret Service by default).
///
/// ```swift
/// let store = try TokenStore(appID: "com.example.notes")
/// try store.set(SecretBytes(utf8: token), for: ItemKey(account: "me", kind: .refreshToken))
/// let token = try store.secret(for: ItemKey(account: "me", kind: .refreshToken))
/// ```
///
/// One connection per store object; every call is serialized, so one object may be shared
/// by any number of threads and tasks. Other processes may open the same file: writes use
/// `BEGIN IMMEDIATE` and wait for each other.
public final class TokenStore: Sendable {
    /// The database file.
    public let path: String
    /// The app id given at open (appears only in the keyring item's label).
    public let appID: String
    /// The key provider holding the data key.
    public var keyProvider: any KeyProvider { connection.keyProvider }
    /// The options given at open.
    public var options: Options { connection.options }
    var logger: TokenStoreLogger { connection.logger }

    /// The connection, the envelope of the active key, and the lock serializing both.
    let connection: StoreConnection

    /// The session layer's transactions on this store.
    package var ledger: SessionLedger { SessionLedger(connection: connection) }

    // MARK: Opening

    /// The default location: `$XDG_DATA_HOME/<app-id>/tokens.sqlite`, or
    /// `~/.local/share/<app-id>/tokens.sqlite` when `XDG_DATA_HOME` is unset.
    /// - Throws: `invalidInput` for an app id that is not a plain name.
    public static func defaultPath(appID: String) throws -> String {
        try validateAppID(appID)
        let environment = ProcessInfo.processInfo.environment
        let base: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            base = (environment["HOME"] ?? PathNames.passwordDatabaseHome()) + "/.local/share"
        }
        return "\(base)/\(appID)/tokens.sqlite"
    }

    /// Opens (or creates) the store at the default location for `appID`.
    ///
    /// With no `keyProvider`, ``KeyProviderSelection/automatic(storePath:probeTimeout:)`` picks
    /// one: the Secret Service, or inside a Flatpak sandbox that cannot reach it the Secret
    /// portal (``PortalKeyProvider``).
    /// - Throws: ``TokenStoreError`` — `secretServiceUnavailable`, `keyringLocked`,
    ///   `dataKeyMissing`, `dataKeyCorrupt`, `storeRolledBack` (the file is older than its epoch
    ///   in the key provider: restored from an older copy; see <doc:StoreEpoch>), `wrongKeyProvider`
    ///   (the store records that another kind of provider made its key; the message names it, and
    ///   ``TokenStoreError/recordedKeyProvider`` holds it), `integrityCheckFailed` (that record, or
    ///   the epoch's, was altered or removed: see ``KeyProviderKind``),
    ///   `databaseCorrupt`, `schemaTampered` (a trigger,
    ///   view, table or index was added or changed outside this library), `schemaTooNew`,
    ///   `migrationFailed`, `unsafeFileLayout`, `invalidInput`, `ioError`, `diskFull`.
    public convenience init(
        appID: String, keyProvider: (any KeyProvider)? = nil, logger: TokenStoreLogger = .disabled,
        options: Options = Options()
    ) throws {
        try self.init(
            path: Self.defaultPath(appID: appID), appID: appID, keyProvider: keyProvider, logger: logger,
            options: options)
    }

    /// Opens (or creates) the store at `path`.
    ///
    /// A new store gets a new data key, made while holding the database write lock so two
    /// processes opening it at once end with one key. A store that already holds sealed
    /// rows never gets a new key: a key that cannot be read is an error, never "first run".
    /// Owed maintenance runs here (see ``performOwedMaintenance()``), and so does the local part
    /// of a logout interrupted at least two minutes ago (as the offline logout would have finished it);
    /// a failure of either is logged, never thrown: the store opens with every row readable.
    /// - Throws: as ``init(appID:keyProvider:logger:options:)``.
    public convenience init(
        path: String, appID: String, keyProvider: (any KeyProvider)? = nil,
        logger: TokenStoreLogger = .disabled, options: Options = Options()
    ) throws {
        try self.init(
            path: path, appID: appID, keyProvider: keyProvider, logger: logger, options: options, migrator: Migrator())
    }

    /// Opens the store bringing its schema up to `migrator`'s newest version, making keys of
    /// `keyScheme` (tests build stores of an older version or key scheme this way, to check the
    /// upgrade from them; a store opened with an older scheme is not upgraded by that object),
    /// through the SQLite VFS named `vfs` (tests inject I/O faults this way; nil: SQLite's default).
    /// With no `keyProvider`: ``KeyProviderSelection/automatic(storePath:probeTimeout:)``'s choice,
    /// the recorded provider read on the connection the file was checked on.
    init(
        path: String, appID: String, keyProvider: (any KeyProvider)?, logger: TokenStoreLogger, options: Options, migrator: Migrator,
        vfs: String? = nil, keyScheme: KeyScheme = .current
    ) throws {
        try Self.validateAppID(appID)
        self.path = path
        self.appID = appID
        // Judged before anything is made or changed: a file that is not a store stays untouched.
        let state = try FileLayout.judge(databasePath: path)
        // The one read-only connection of the looks before the open (a read-only open reads on it).
        var looked = state == .nonEmpty ? try StoreIdentity.checkedConnection(path: path, vfs: vfs).db : nil
        let keyProvider = keyProvider ?? KeyProviderSelection.automatic(
            storePath: path, recorded: { looked.flatMap { try? KeyProviderRecord.unchecked($0) } })
        keyProvider.beginConnecting()  // while the database is read below
        let opened: (db: Database, setup: KeySetup.Result)
        if options.readOnly {
            opened = try Self.openReadOnly(
                path: path, state: state, looked: looked, appID: appID, keyProvider: keyProvider, logger: logger,
                migrator: migrator, vfs: vfs)
        } else {
            looked = nil  // closed before the writing connection opens
            let created = try FileLayout.prepare(databasePath: path)
            do {
                opened = try Self.openForWriting(
                    path: path, appID: appID, keyProvider: keyProvider, logger: logger, migrator: migrator, vfs: vfs,
                    keyScheme: keyScheme)
            } catch {
                // A failed first open (no Secret Service, a locked keyring) leaves no empty store behind.
                if created.file, Self.holdsNoDataKey(path) {
                    FileLayout.removeCreated(created, databasePath: path)
                    logger.info("removed the store file this failed open had created")
                }
                throw error
            }
        }
        let (db, setup) = opened
        let envelope = Envelope(storeID: setup.storeID, key: setup.key)
        var applied: [Int] = []
        // A file older than its epoch in the key provider is refused before anything runs on it.
        try StoreEpoch.checkAtOpen(
            db, envelope: envelope, provider: keyProvider, appID: appID, logger: logger, providerEpoch: setup.providerEpoch)
        if !options.readOnly {
            applied += try migrator.migrate(db) { migration in
            guard migration.version == RowMACBackfill.version else { return }
            // In the migration's transaction: every MAC-less row gets its MAC, and the provider
            // that just opened the key is recorded.
            let counts = try RowMACBackfill.run(db, envelope: envelope)
            try KeyProviderRecord.write(db, keyProvider.kind, envelope: envelope)
            logger.info(
                "gave legacy rows their MACs",
                metadata: ["outbox": "\(counts.outbox)", "marks": "\(counts.marks)", "history": "\(counts.history)",
                           "history.chainsLeft": "\(counts.chainsLeft)"])
            }
        }
        if !applied.isEmpty { logger.info("applied migrations", metadata: ["migrations": "\(applied)"]) }
        try KeyProviderRecord.check(db, envelope: envelope)
        connection = StoreConnection(
            path: path, appID: appID, keyProvider: keyProvider, options: options, logger: logger, database: db,
            envelope: envelope, newKeyScheme: keyScheme)
        logger.debug("store opened", metadata: ["key.provider": keyProvider.name, "key.created": "\(setup.created)"])
        if options.readOnly { return }
        connection.checkpointLeftoverWAL()
        do {
            // A logout interrupted after its first step finishes its local part here, not only
            // at the next logout or resume (a read-only open leaves it: it writes nothing).
            let finished = try ledger.finishInterruptedLogouts()
            if finished > 0 { logger.info("finished interrupted logouts locally", metadata: ["logouts": "\(finished)"]) }
        } catch {
            logger.info("interrupted logouts could not be finished now", metadata: ["error": TokenStoreError.code(of: error)])
        }
        do {
            try performOwedMaintenance()
        } catch {
            logger.info("owed maintenance could not run now", metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    /// The writing open: the connection (WAL mode), the migrations, the schema check, the data key
    /// (made for a new store).
    private static func openForWriting(
        path: String, appID: String, keyProvider: any KeyProvider, logger: TokenStoreLogger, migrator: Migrator, vfs: String?,
        keyScheme: KeyScheme
    ) throws -> (db: Database, setup: KeySetup.Result) {
        let db = try Database(path: path, vfs: vfs)
        // Migrations from version 10 on need the data key (RowMACBackfill): applied once it is loaded.
        let applied = try migrator.migrate(db, upTo: RowMACBackfill.version - 1)
        if !applied.isEmpty { logger.info("applied migrations", metadata: ["migrations": "\(applied)"]) }
        try SchemaCheck.check(db, migrator: migrator)
        // A store that records another key provider is refused before its key is asked for.
        try KeyProviderRecord.refuseOtherProvider(db, provider: keyProvider)
        var keySetup = KeySetup(database: db, provider: keyProvider, appID: appID, logger: logger)
        keySetup.newKeyScheme = keyScheme
        return (db, try keySetup.openOrCreate())
    }

    /// The read-only open (``Options/readOnly``): an existing store at the newest schema with a
    /// data key, read through ``Database/openForReading(path:vfs:)``; nothing is created,
    /// migrated or written, and no side file is added.
    private static func openReadOnly(
        path: String, state: FileLayout.FileState, looked: Database?, appID: String, keyProvider: any KeyProvider,
        logger: TokenStoreLogger, migrator: Migrator, vfs: String?
    ) throws -> (db: Database, setup: KeySetup.Result) {
        switch state {
        case .missing:
            throw TokenStoreError(
                .ioError, "There is no store file at the given path; a read-only open does not make one.",
                cause: .posix(errno: ENOENT, operation: "lstat"))
        case .empty:
            throw TokenStoreError(
                .notAStore, "The file at the store path is empty: no store was made in it yet, and a read-only open does not make one.")
        case .nonEmpty:
            break
        }
        let db = try looked ?? Database.openForReading(path: path, vfs: vfs)
        let (version, pending, hasKey) = try db.readTransaction {
            let version = try migrator.currentVersion(in: db)
            let pending = version > migrator.latestVersion ? [] : try migrator.pendingMigrations(in: db)
            let activeKeys = version > 0 ? try db.scalarInt("SELECT count(*) FROM data_keys WHERE status = 'active'") ?? 0 : 0
            let hasKey = activeKeys > 0
            return (version, pending, hasKey)
        }
        if version > migrator.latestVersion { _ = try migrator.pendingMigrations(in: db) }  // schemaTooNew
        if let newest = pending.last {
            throw TokenStoreError(
                .migrationRequired,
                "The store's schema is at version \(version) and needs migrating to version \(newest.version); "
                    + "a read-only open does not migrate.",
                hint: "Open the store for writing once to migrate it (tokenctl migrate).",
                schemaVersions: (version, migrator.latestVersion))
        }
        try SchemaCheck.check(db, migrator: migrator)
        // A store that records another key provider is refused before any key is asked for.
        try KeyProviderRecord.refuseOtherProvider(db, provider: keyProvider)
        if !hasKey, let storeID = try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", [], { $0.blob(0) }),
            try SealedTables.rowCount(db) + Int(try db.scalarInt("SELECT count(*) FROM data_keys") ?? 0) > 0
        {
            // Key records or sealed rows, but no active key: lost or damaged, as the writing open says.
            throw try KeyCheck.missingKeyError(database: db, provider: keyProvider, storeID: storeID, appID: appID)
        }
        guard hasKey else {
            throw TokenStoreError(
                .notAStore, "The store has no data key yet (nothing was ever stored in it), and a read-only open does not make one.")
        }
        let keySetup = KeySetup(database: db, provider: keyProvider, appID: appID, logger: logger)
        return (db, try keySetup.openOrCreate())
    }

    /// Whether the store file at `path` holds no data key record (a first open failed before
    /// its key was made); false when that cannot be told (the file is then kept).
    private static func holdsNoDataKey(_ path: String) -> Bool {
        do {
            let db = try Database.openForReading(path: path)
            return try db.readTransaction {
                let tables = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'data_keys'") ?? 0
                if tables == 0 { return true }
                return try db.scalarInt("SELECT count(*) FROM data_keys") == 0
            }
        } catch {
            return false  // unreadable now: keeping the file is the safe side
        }
    }

    /// Closes the connection. Later calls throw `storeClosed`. The data key stays in guarded
    /// memory (locked, kept out of core dumps) until the store object is released, which
    /// wipes it. Called from inside one of the store's own callbacks, it does nothing (and
    /// logs that).
    public func close() {
        do {
            try connection.close()
        } catch {
            logger.info("close() was called from inside a callback of the same store; ignored")
        }
    }

    static func validateAppID(_ appID: String) throws {
        guard appID.isPlainName, appID.utf8.count <= 255, appID != ".", appID != ".." else {
            throw TokenStoreError(.invalidInput, "The app id must be 1–255 characters of [A-Za-z0-9._-].")
        }
    }

    /// The store's random id (hex), as named in the key provider's attributes.
    public var storeIdentifier: String { Hex.encode(connection.envelope.storeID) }

    /// The active data key's id (hex). Answers from inside a callback of the store too.
    public var keyIdentifier: String { Hex.encode(connection.envelope.keyID) }
}
