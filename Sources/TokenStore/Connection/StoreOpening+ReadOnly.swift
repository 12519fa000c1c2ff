import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

extension StoreOpening {
    /// The read-only open (``TokenStore/Options/readOnly``): an existing store at the newest schema
    /// with a data key, read on the connection its file was checked on
    /// (``Database/openForReading(path:vfs:)``); nothing is created, migrated or written, no side
    /// file is added, and no open-time duty runs.
    struct ReadOnly: StoreOpeningStrategy {
        var readsOnCheckedConnection: Bool { true }

        func openWithKey(
            _ opening: StoreOpening, state: FileLayout.FileState, checked: Database?, keyProvider: any KeyProvider
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
            let migrator = opening.migrator
            let db = try checked ?? Database.openForReading(path: opening.path, vfs: opening.vfs)
            let (version, pending, hasKey) = try db.readTransaction {
                let version = try migrator.currentVersion(in: db)
                let pending = version > migrator.latestVersion ? [] : try migrator.pendingMigrations(in: db)
                return (version, pending, version > 0 ? try DataKeyRecords.hasActiveKey(db) : false)
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
            if !hasKey, let storeID = try DataKeyRecords.storeID(db), try DataKeyRecords.holdKeysOrSealedRows(db) {
                // Key records or sealed rows, but no active key: lost or damaged, as the writing open says.
                throw try KeyCheck.missingKeyError(database: db, provider: keyProvider, storeID: storeID, appID: opening.appID)
            }
            guard hasKey else {
                throw TokenStoreError(
                    .notAStore, "The store has no data key yet (nothing was ever stored in it), and a read-only open does not make one.")
            }
            return (db, try opening.keySetup(db, keyProvider: keyProvider).openOrCreate())
        }

        func withKeyLoaded(_ opening: StoreOpening, _ db: Database, envelope: Envelope, keyProvider: any KeyProvider) throws {}

        func finish(_ store: TokenStore, logger: TokenStoreLogger) {}
    }
}
