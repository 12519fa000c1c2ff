import FoundationEssentials

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
    /// The steps are ``StoreOpening``'s.
    init(
        path: String, appID: String, keyProvider: (any KeyProvider)?, logger: TokenStoreLogger, options: Options, migrator: Migrator,
        vfs: String? = nil, keyScheme: KeyScheme = .current
    ) throws {
        try Self.validateAppID(appID)
        self.path = path
        self.appID = appID
        let opening = StoreOpening(
            path: path, appID: appID, options: options, logger: logger, migrator: migrator, vfs: vfs, keyScheme: keyScheme)
        connection = try opening.open(keyProvider: keyProvider)
        opening.finish(self)
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
    public var storeIdentifier: String { Hex.encode(connection.storeID) }

    /// The active data key's id (hex). Answers from inside a callback of the store too.
    public var keyIdentifier: String { Hex.encode(connection.lastKeyID.withLock { $0 }) }
}
