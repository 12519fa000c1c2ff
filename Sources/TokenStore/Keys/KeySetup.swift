import FoundationEssentials

/// Finds, or for a new store makes, the store id and data key at open time.
struct KeySetup {
    let database: Database
    let provider: any KeyProvider
    let appID: String
    let logger: TokenStoreLogger
    /// The scheme of a key made here (tests make legacy-scheme stores with it).
    var newKeyScheme: KeyScheme = .current

    struct Result {
        let storeID: [UInt8]
        let key: DataKey
        let created: Bool
        /// The store's epoch in the provider, when it was read with the key (``KeyProvider/loadKeyAndStoreEpoch(_:)``);
        /// nil: ``StoreEpoch/checkAtOpen`` asks the provider.
        var providerEpoch: UInt64? = nil
    }

    func openOrCreate() throws -> Result {
        if let existing = try readState(), let keyID = existing.activeKeyID {
            return try load(storeID: existing.storeID, keyID: keyID, created: false)
        }
        // New store (or a crash before its key was recorded). One opener at a time makes the key:
        // the others wait on the key lock for as long as the maker's provider calls take. Without
        // it they waited only for SQLite's bounded busy time-out on the write lock below, which a
        // maker's keyring calls outlast on a loaded machine (a second opener failed with
        // databaseBusy instead of finding the key made).
        let keyLock = try RotationLock.acquireWaiting(storePath: database.path)
        defer { withExtendedLifetime(keyLock) {} }
        if let existing = try readState(), let keyID = existing.activeKeyID {
            return try load(storeID: existing.storeID, keyID: keyID, created: false)  // made while we waited
        }
        var keyLost = false
        let outcome = try database.writeTransaction { () throws -> Result? in
            var state = try readState()
            if state == nil {
                let storeID = SecretBytes.random(count: 16).copyBytes()
                try database.run(
                    "INSERT INTO store_info(id, store_id, created_at) VALUES (1, ?, ?)",
                    [.blob(storeID), .int(Timestamp.nowMillis())])
                state = StoreState(storeID: storeID, activeKeyID: nil)
            }
            guard let state else { return nil }
            if state.activeKeyID != nil { return nil }  // another process made it while we waited
            if try DataKeyRecords.holdKeysOrSealedRows(database) {
                // No new key; find out outside the write lock whether the key is really gone.
                keyLost = true
                return nil
            }
            // Only a test opens a store below schema version 8: its keys are legacy ones.
            let hasScheme = try KeyCheck.hasSchemeColumn(database)
            let key = try DataKey.generate(scheme: hasScheme ? newKeyScheme : .legacy)
            try provider.storeKey(key.material, for: reference(storeID: state.storeID, keyID: key.keyID))
            CrashPoint.reach("keySetup.afterStoreKey")
            try database.run(
                "INSERT INTO data_keys(key_id, status, key_check, created_at) VALUES (?, 'active', ?, ?)",
                [.blob(key.keyID), .blob(KeyCheck.seal(storeID: state.storeID, key: key)), .int(Timestamp.nowMillis())])
            if hasScheme {
                try database.run("UPDATE data_keys SET scheme = ? WHERE key_id = ?", [.int(key.scheme.rawValue), .blob(key.keyID)])
            }
            if try StoreEpoch.hasColumns(database) {
                // A new key for a store with no sealed row: a new store (the provider holds no
                // epoch for its random id) or one just reset, which keeps the epoch it had.
                let epoch = try provider.storeEpoch(storeID: Hex.encode(state.storeID))
                try StoreEpoch.write(database, epoch, envelope: Envelope(storeID: state.storeID, key: key))
            }
            // The provider that made the key (schema version 10; older stores get it when migrating).
            try KeyProviderRecord.write(database, provider.kind, envelope: Envelope(storeID: state.storeID, key: key))
            try AccessPolicyRecord.writeForNewKey(database, envelope: Envelope(storeID: state.storeID, key: key))
            logger.info("created a new data key", metadata: ["key.provider": provider.name])
            return Result(storeID: state.storeID, key: key, created: true)
        }
        if let outcome { return outcome }
        if keyLost, let storeID = try readState()?.storeID {
            // Sealed rows and no active key record: the key is lost, or the record is damaged.
            throw try KeyCheck.missingKeyError(database: database, provider: provider, storeID: storeID, appID: appID)
        }
        guard let state = try readState(), let keyID = state.activeKeyID else {
            throw TokenStoreError(.ioError, "The store's key record disappeared while opening.")
        }
        return try load(storeID: state.storeID, keyID: keyID, created: false)
    }

    private func load(storeID: [UInt8], keyID: [UInt8], created: Bool) throws -> Result {
        let (material, providerEpoch) = try KeySlotOpening(database: database, provider: provider, appID: appID)
            .loadKey(storeID: storeID, keyID: keyID)
        guard let material else {
            throw try KeyCheck.missingKeyError(database: database, provider: provider, storeID: storeID, appID: appID)
        }
        let key = try KeyCheck.checkedKey(database: database, storeID: storeID, keyID: keyID, material: material)
        return Result(storeID: storeID, key: key, created: created, providerEpoch: providerEpoch)
    }

    func reference(storeID: [UInt8], keyID: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
    }

    struct StoreState {
        let storeID: [UInt8]
        let activeKeyID: [UInt8]?
    }

    private func readState() throws -> StoreState? {
        guard let storeID = try DataKeyRecords.storeID(database) else { return nil }
        return StoreState(storeID: storeID, activeKeyID: try DataKeyRecords.activeKeyID(database))
    }
}
