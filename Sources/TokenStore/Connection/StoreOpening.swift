import FoundationEssentials

/// The open of a store, from the judged path to a ``StoreConnection``: the steps every open takes,
/// in order, with what differs between a writing and a read-only open in a strategy
/// (``Writing``, ``ReadOnly``; ``TokenStore/Options/readOnly`` chooses).
///
/// 1. The file is judged before anything is made or changed: a file that is not a store stays
///    untouched. A non-empty one is checked on one read-only connection, on which the recorded
///    key provider is read (for the automatic choice) and a read-only open then reads the store.
/// 2. The strategy opens its connection and loads the data key (a writing open makes it for a new
///    store, and migrates up to the migrations that need the key).
/// 3. A file older than its epoch in the key provider is refused before anything runs on it.
/// 4. The strategy's work with the key loaded (a writing open: the remaining migrations).
/// 5. The recorded key provider is checked against its MAC.
/// 6. After the store object exists, the strategy's open-time duties (``finish(_:)``).
struct StoreOpening {
    let path: String
    let appID: String
    let options: TokenStore.Options
    let logger: TokenStoreLogger
    let migrator: Migrator
    /// The SQLite VFS (tests inject I/O faults this way; nil: SQLite's default).
    let vfs: String?
    /// The scheme of a key made by this open, and of the connection's later keys.
    let keyScheme: KeyScheme
    let strategy: any StoreOpeningStrategy

    init(
        path: String, appID: String, options: TokenStore.Options, logger: TokenStoreLogger, migrator: Migrator,
        vfs: String?, keyScheme: KeyScheme
    ) {
        self.path = path
        self.appID = appID
        self.options = options
        self.logger = logger
        self.migrator = migrator
        self.vfs = vfs
        self.keyScheme = keyScheme
        strategy = options.readOnly ? ReadOnly() : Writing()
    }

    /// Steps 1–5: the open connection under the loaded key. With no `keyProvider`:
    /// ``KeyProviderSelection/automatic(storePath:probeTimeout:)``'s choice, the recorded provider
    /// read on the connection the file was checked on.
    func open(keyProvider: (any KeyProvider)?) throws -> StoreConnection {
        let state = try FileLayout.judge(databasePath: path)
        // A store this open would make under a policy it cannot enforce: refused before its file and
        // its key are made (an existing store's requested policy is weighed against its record below).
        if state != .nonEmpty, let requested = options.accessPolicy { try AccessPolicyGate.check(requested) }
        // The one read-only connection of the looks before the open (a read-only open reads on it).
        var looked = state == .nonEmpty ? try StoreIdentity.checkedConnection(path: path, vfs: vfs).db : nil
        let automatic = keyProvider == nil
        let chosen = keyProvider ?? KeyProviderSelection.automatic(
            storePath: path, recorded: { looked.flatMap { try? KeyProviderRecord.unchecked($0) } })
        // Without a named provider, the store's other unattended key slots are tried after the automatic choice.
        let fallbacks = automatic ? looked.map { slotFallbacks($0, after: chosen.kind) } ?? [] : []
        chosen.beginConnecting()  // while the database is read below
        if !strategy.readsOnCheckedConnection { looked = nil }  // closed before the writing connection opens
        let (keyProvider, db, setup) = try openWithFirstUsableSlot([chosen] + fallbacks, state: state, checked: looked)
        let envelope = Envelope(storeID: setup.storeID, key: setup.key)
        try StoreEpoch.checkAtOpen(
            db, envelope: envelope, provider: keyProvider, appID: appID, logger: logger, providerEpoch: setup.providerEpoch)
        try strategy.withKeyLoaded(self, db, envelope: envelope, keyProvider: keyProvider)
        try KeyProviderRecord.check(db, envelope: envelope)
        let access = try AccessPolicyRecord.atOpen(db, envelope: envelope, requested: options.accessPolicy, writes: !options.readOnly)
        try KeySlots.check(db, envelope: envelope)
        let connection = StoreConnection(
            path: path, appID: appID, keyProvider: keyProvider, options: options, logger: logger, database: db,
            envelope: envelope, newKeyScheme: keyScheme)
        connection.opened(with: access)
        connection.startIdleLock()
        logger.debug("store opened", metadata: ["key.provider": keyProvider.name, "key.created": "\(setup.created)"])
        return connection
    }

    /// The providers of the store's unattended key slots other than `kind`'s (``KeySlotOpening/unattendedKinds(_:)``).
    private func slotFallbacks(_ db: Database, after kind: KeyProviderKind) -> [any KeyProvider] {
        KeySlotOpening.unattendedKinds(db).filter { $0 != kind }.compactMap { $0.traits?.make?(path) }
    }

    /// Step 2 with each provider in turn until one reaches the key; a failure that says the key
    /// cannot be reached that way (``KeySlotOpening/mayTryNextSlot(after:)``) goes on to the
    /// next, any other is thrown at once. All failing: the first provider's error.
    private func openWithFirstUsableSlot(
        _ providers: [any KeyProvider], state: FileLayout.FileState, checked: Database?
    ) throws -> (any KeyProvider, Database, KeySetup.Result) {
        var firstError: Error?
        for (index, provider) in providers.enumerated() {
            do {
                let (db, setup) = try strategy.openWithKey(self, state: state, checked: checked, keyProvider: provider)
                if index > 0 { logger.info("opened with another key slot", metadata: ["key.provider": provider.name]) }
                return (provider, db, setup)
            } catch {
                guard index + 1 < providers.count, KeySlotOpening.mayTryNextSlot(after: error) else { throw firstError ?? error }
                firstError = firstError ?? error
            }
        }
        throw firstError ?? TokenStoreError(.ioError, "No key provider to open the store with.")
    }

    /// Step 6, on the store just opened: its open-time duties; their failures are logged, never thrown.
    func finish(_ store: TokenStore) {
        strategy.finish(store, logger: logger)
    }

    /// The key setup for `db` (step 2).
    func keySetup(_ db: Database, keyProvider: any KeyProvider) -> KeySetup {
        KeySetup(database: db, provider: keyProvider, appID: appID, logger: logger)
    }

    /// Logs the migrations an open applied (nothing when none was).
    func logApplied(_ applied: [Int]) {
        if !applied.isEmpty { logger.info("applied migrations", metadata: ["migrations": "\(applied)"]) }
    }
}

/// What differs between a writing and a read-only open (see ``StoreOpening``).
protocol StoreOpeningStrategy {
    /// Whether the open reads on the read-only connection the file was checked on; otherwise
    /// that connection is closed before this open's own connection opens.
    var readsOnCheckedConnection: Bool { get }

    /// Opens the connection and loads (or makes) the data key. `state` is the file as judged,
    /// `checked` the connection it was checked on (nil unless ``readsOnCheckedConnection``, or
    /// when the file was missing or empty).
    func openWithKey(
        _ opening: StoreOpening, state: FileLayout.FileState, checked: Database?, keyProvider: any KeyProvider
    ) throws -> (db: Database, setup: KeySetup.Result)

    /// The work that needs the key, once the epoch is checked and before the key-provider
    /// record is.
    func withKeyLoaded(_ opening: StoreOpening, _ db: Database, envelope: Envelope, keyProvider: any KeyProvider) throws

    /// The open-time duties on the store just opened.
    func finish(_ store: TokenStore, logger: TokenStoreLogger)
}
