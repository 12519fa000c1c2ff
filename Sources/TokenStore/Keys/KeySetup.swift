import Foundation

/// Finds, or for a new store makes, the store id and data key at open time.
struct KeySetup {
    let database: Database
    let provider: any KeyProvider
    let appID: String
    let logger: TokenStoreLogger

    struct Result {
        let storeID: [UInt8]
        let key: DataKey
        let created: Bool
    }

    static let keyCheckPlaintext = Array("tokenstore key check v1".utf8)

    func openOrCreate() throws -> Result {
        if let existing = try readState(), let keyID = existing.activeKeyID {
            return try load(storeID: existing.storeID, keyID: keyID, created: false)
        }
        // New store (or a crash before its key was recorded): decide under the write lock.
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
            if try sealedRowCount() > 0 {
                throw TokenStoreError(
                    .dataKeyMissing,
                    "The store holds sealed rows but records no active data key; no new key is made.",
                    hint: "Restore the key, or reset the store explicitly (resetStore) to start over.")
            }
            let key = try DataKey.generate()
            try provider.storeKey(key.material, for: reference(storeID: state.storeID, keyID: key.keyID))
            try database.run(
                "INSERT INTO data_keys(key_id, status, key_check, created_at) VALUES (?, 'active', ?, ?)",
                [.blob(key.keyID), .blob(Self.sealKeyCheck(storeID: state.storeID, key: key)), .int(Timestamp.nowMillis())])
            logger.info("created a new data key", metadata: ["key.provider": provider.name])
            return Result(storeID: state.storeID, key: key, created: true)
        }
        if let outcome { return outcome }
        guard let state = try readState(), let keyID = state.activeKeyID else {
            throw TokenStoreError(.ioError, "The store's key record disappeared while opening.")
        }
        return try load(storeID: state.storeID, keyID: keyID, created: false)
    }

    private func load(storeID: [UInt8], keyID: [UInt8], created: Bool) throws -> Result {
        guard let material = try provider.loadKey(reference(storeID: storeID, keyID: keyID)) else {
            throw TokenStoreError(
                .dataKeyMissing,
                "The store's data key is missing from the key provider (\(provider.name)); its sealed rows cannot be opened.",
                hint: "Restore the keyring that held the key, or reset the store explicitly (resetStore) to start over.")
        }
        let key = try DataKey(keyID: keyID, material: material)
        try Self.verifyKeyCheck(database: database, storeID: storeID, key: key)
        return Result(storeID: storeID, key: key, created: created)
    }

    func reference(storeID: [UInt8], keyID: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
    }

    static func sealKeyCheck(storeID: [UInt8], key: DataKey) -> [UInt8] {
        keyCheckPlaintext.withUnsafeBytes {
            Sealer.seal($0, key: key, binding: .init(storeID: storeID, keyID: key.keyID, kind: .keyCheck, rowKey: key.keyID))
        }
    }

    static func verifyKeyCheck(database: Database, storeID: [UInt8], key: DataKey) throws {
        guard let check = try database.firstRow("SELECT key_check FROM data_keys WHERE key_id = ?", [.blob(key.keyID)], { $0.blob(0) }) else {
            throw TokenStoreError(.dataKeyMissing, "The store has no record of its data key.")
        }
        do {
            let opened = try Sealer.open(check, key: key, binding: .init(storeID: storeID, keyID: key.keyID, kind: .keyCheck, rowKey: key.keyID))
            guard opened.copyBytes() == keyCheckPlaintext else { throw TokenStoreError(.integrityCheckFailed, "key check") }
        } catch {
            throw TokenStoreError(
                .dataKeyCorrupt, "The key provider returned a key that does not open this store.",
                hint: "The keyring holds a different key under this store's id; restore the right one or reset the store.")
        }
    }

    struct StoreState {
        let storeID: [UInt8]
        let activeKeyID: [UInt8]?
    }

    private func readState() throws -> StoreState? {
        guard let storeID = try database.firstRow("SELECT store_id FROM store_info WHERE id = 1", [], { $0.blob(0) }) else {
            return nil
        }
        let keyID = try database.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", [], { $0.blob(0) })
        return StoreState(storeID: storeID, activeKeyID: keyID)
    }

    private func sealedRowCount() throws -> Int {
        try SealedTables.rowCount(database) + Int(try database.scalarInt("SELECT count(*) FROM data_keys") ?? 0)
    }
}
