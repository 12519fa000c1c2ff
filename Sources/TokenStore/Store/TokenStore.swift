import Foundation

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
public final class TokenStore: @unchecked Sendable {  // all mutable state is behind `lock`
    /// The database file.
    public let path: String
    /// The app id given at open (appears only in the keyring item's label).
    public let appID: String
    /// The key provider holding the data key.
    public let keyProvider: any KeyProvider
    /// The options given at open.
    public let options: Options
    let logger: TokenStoreLogger

    private let lock = StoreLock()
    /// Guards `dataKey` for ``keyIdentifier``, which must answer even from inside a callback;
    /// `dataKey` changes only with both locks held.
    private let keyLock = NSLock()
    private var database: Database?
    /// The store's random id; part of every sealed value's associated data.
    let storeID: [UInt8]
    private(set) var dataKey: DataKey

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
            base = (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share"
        }
        return "\(base)/\(appID)/tokens.sqlite"
    }

    /// Opens (or creates) the store at the default location for `appID`.
    /// - Throws: ``TokenStoreError`` — `secretServiceUnavailable`, `keyringLocked`,
    ///   `dataKeyMissing`, `dataKeyCorrupt`, `databaseCorrupt`, `schemaTooNew`,
    ///   `migrationFailed`, `unsafeFileLayout`, `invalidInput`, `ioError`.
    public convenience init(
        appID: String, keyProvider: any KeyProvider = SecretServiceKeyProvider(), logger: TokenStoreLogger = .disabled,
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
    /// A key rotation that a crash interrupted is finished (or rolled back) here; see
    /// ``rotateDataKey(batchSize:progress:)``.
    /// - Throws: as ``init(appID:keyProvider:logger:options:)``.
    public convenience init(
        path: String, appID: String, keyProvider: any KeyProvider = SecretServiceKeyProvider(),
        logger: TokenStoreLogger = .disabled, options: Options = Options()
    ) throws {
        try self.init(path: path, appID: appID, keyProvider: keyProvider, logger: logger, options: options, migrator: Migrator())
    }

    /// Opens the store bringing its schema up to `migrator`'s newest version (tests build
    /// stores of an older version this way, to check the upgrade from them).
    init(
        path: String, appID: String, keyProvider: any KeyProvider, logger: TokenStoreLogger, options: Options, migrator: Migrator
    ) throws {
        try Self.validateAppID(appID)
        self.path = path
        self.appID = appID
        self.keyProvider = keyProvider
        self.options = options
        self.logger = logger
        try FileLayout.prepare(databasePath: path)
        let db = try Database(path: path)
        let applied = try migrator.migrate(db)
        if !applied.isEmpty { logger.info("applied migrations", metadata: ["migrations": "\(applied)"]) }
        let setup = try KeySetup(database: db, provider: keyProvider, appID: appID, logger: logger).openOrCreate()
        storeID = setup.storeID
        dataKey = setup.key
        database = db
        logger.debug("store opened", metadata: ["key.provider": keyProvider.name, "key.created": "\(setup.created)"])
        recoverInterruptedRotation()
    }

    /// Closes the connection. Later calls throw `storeClosed`. The data key stays in guarded
    /// memory (locked, kept out of core dumps) until the store object is released, which
    /// wipes it. Called from inside one of the store's own callbacks, it does nothing (and
    /// logs that).
    public func close() {
        do {
            try lock.withLock { database = nil }
        } catch {
            logger.info("close() was called from inside a callback of the same store; ignored")
        }
    }

    static func validateAppID(_ appID: String) throws {
        guard appID.isPlainName, appID.utf8.count <= 255, appID != ".", appID != ".." else {
            throw TokenStoreError(.invalidInput, "The app id must be 1–255 characters of [A-Za-z0-9._-].")
        }
    }

    // MARK: Serialized access

    /// Runs `body` with the connection, serialized with every other call on this object.
    /// - Throws: `invalidInput` when called from inside a callback of this store (see ``StoreLock``).
    func withDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        try lock.withLock {
            guard let database else { throw TokenStoreError(.storeClosed, "The store was closed.") }
            return try body(database)
        }
    }

    /// A write transaction (`BEGIN IMMEDIATE`), serialized. Picks up a key rotation that
    /// another store object finished meanwhile before `body` runs.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try withDatabase { db in
            try db.writeTransaction {
                try followKeyRotation(db)
                return try body(db)
            }
        }
    }

    /// A read transaction (one snapshot), serialized. Picks up a finished key rotation too.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try withDatabase { db in
            try db.readTransaction {
                try followKeyRotation(db)
                return try body(db)
            }
        }
    }

    /// Called with `lock` held.
    func replaceDataKey(_ key: DataKey) { keyLock.withLock { dataKey = key } }

    /// The store's random id (hex), as named in the key provider's attributes.
    public var storeIdentifier: String { Hex.encode(storeID) }

    /// The active data key's id (hex).
    public var keyIdentifier: String { keyLock.withLock { Hex.encode(dataKey.keyID) } }

    // MARK: Keyed hashes (the only form identifiers take in the clear)

    func itemLookup(_ key: ItemKey, under other: DataKey? = nil) -> [UInt8] {
        (other ?? dataKey).lookupHash(domain: 1, [Array(key.service.utf8), Array(key.account.utf8), [key.kind.code]])
    }

    func accountRef(service: String, account: String, under other: DataKey? = nil) -> [UInt8] {
        (other ?? dataKey).lookupHash(domain: 2, [Array(service.utf8), Array(account.utf8)])
    }

    func userRef(_ userID: String, under other: DataKey? = nil) -> [UInt8] {
        (other ?? dataKey).lookupHash(domain: 3, [Array(userID.utf8)])
    }

    func binding(_ kind: RecordKind, rowKey: [UInt8], key: DataKey? = nil) -> Sealer.Binding {
        Sealer.Binding(storeID: storeID, keyID: (key ?? dataKey).keyID, kind: kind, rowKey: rowKey)
    }

    /// Opens a sealed column: the row's key id must be the active key.
    func open(_ blob: [UInt8], keyID: [UInt8], kind: RecordKind, rowKey: [UInt8]) throws -> RecordFields {
        guard keyID == dataKey.keyID else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed \(kind) record names a data key this store does not use.")
        }
        let plaintext = try Sealer.open(blob, key: dataKey, binding: binding(kind, rowKey: rowKey))
        return try plaintext.withUnsafeBytes { try RecordFields.decode($0) }
    }

    func seal(_ fields: RecordFields, kind: RecordKind, rowKey: [UInt8]) -> [UInt8] {
        fields.encode().withUnsafeBytes { Sealer.seal($0, key: dataKey, binding: binding(kind, rowKey: rowKey)) }
    }
}
