import FoundationEssentials

extension StoreOpening {
    /// The writing open: the file and its folder made or checked (``FileLayout/prepare(databasePath:)``),
    /// the connection (WAL mode), the migrations, the schema check, the data key (made for a new
    /// store); at the end the open-time duties (a leftover WAL checkpointed, interrupted logouts
    /// finished locally, owed maintenance).
    struct Writing: StoreOpeningStrategy {
        var readsOnCheckedConnection: Bool { false }

        func openWithKey(
            _ opening: StoreOpening, state: FileLayout.FileState, checked: Database?, keyProvider: any KeyProvider
        ) throws -> (db: Database, setup: KeySetup.Result) {
            let created = try FileLayout.prepare(databasePath: opening.path)
            do {
                return try connectAndLoadKey(opening, keyProvider: keyProvider)
            } catch {
                // A failed first open (no Secret Service, a locked keyring) leaves no empty store behind.
                if created.file, DataKeyRecords.noneRecorded(atPath: opening.path) {
                    FileLayout.removeCreated(created, databasePath: opening.path)
                    opening.logger.info("removed the store file this failed open had created")
                }
                throw error
            }
        }

        private func connectAndLoadKey(
            _ opening: StoreOpening, keyProvider: any KeyProvider
        ) throws -> (db: Database, setup: KeySetup.Result) {
            let db = try Database(path: opening.path, vfs: opening.vfs)
            // Migrations from version 10 on need the data key (RowMACBackfill): applied once it is loaded.
            opening.logApplied(try opening.migrator.migrate(db, upTo: RowMACBackfill.version - 1))
            try SchemaCheck.check(db, migrator: opening.migrator)
            // A store that records another key provider is refused before its key is asked for.
            try KeyProviderRecord.refuseOtherProvider(db, provider: keyProvider)
            var keySetup = opening.keySetup(db, keyProvider: keyProvider)
            keySetup.newKeyScheme = opening.keyScheme
            return (db, try keySetup.openOrCreate())
        }

        /// The migrations that need the key. In the transaction of the one that brings row MACs,
        /// every MAC-less row gets its MAC and the provider that just opened the key is recorded.
        func withKeyLoaded(_ opening: StoreOpening, _ db: Database, envelope: Envelope, keyProvider: any KeyProvider) throws {
            let logger = opening.logger
            opening.logApplied(
                try opening.migrator.migrate(db) { migration in
                    if migration.version == AccessPolicyRecord.version {
                        try AccessPolicyRecord.write(db, AccessPolicyRecord.initial, envelope: envelope)
                    }
                    guard migration.version == RowMACBackfill.version else { return }
                    let counts = try RowMACBackfill.run(db, envelope: envelope)
                    try KeyProviderRecord.write(db, keyProvider.kind, envelope: envelope)
                    logger.info(
                        "gave legacy rows their MACs",
                        metadata: ["outbox": "\(counts.outbox)", "marks": "\(counts.marks)", "history": "\(counts.history)",
                                   "history.chainsLeft": "\(counts.chainsLeft)"])
                })
        }

        func finish(_ store: TokenStore, logger: TokenStoreLogger) {
            store.connection.checkpointLeftoverWAL()
            do {
                // A logout interrupted after its first step finishes its local part here, not only
                // at the next logout or resume (a read-only open leaves it: it writes nothing).
                let finished = try store.ledger.finishInterruptedLogouts()
                if finished > 0 { logger.info("finished interrupted logouts locally", metadata: ["logouts": "\(finished)"]) }
            } catch {
                logger.info("interrupted logouts could not be finished now", metadata: ["error": TokenStoreError.code(of: error)])
            }
            do {
                try store.performOwedMaintenance()
            } catch {
                logger.info("owed maintenance could not run now", metadata: ["error": TokenStoreError.code(of: error)])
            }
        }
    }
}
