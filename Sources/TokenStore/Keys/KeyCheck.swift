import FoundationEssentials

/// The sealed "key check" each `data_keys` row holds, and what a failed check means.
///
/// A key is checked against its row's key check, sealed under the key's sealing key (so under
/// the key's ``KeyScheme``). Before the store blames the key (missing, or a different one), it
/// looks at whether the key it has still opens the store some other way: then the damage is in
/// the database's key metadata (`data_keys.status`, `scheme` or `key_check` changed), the key is
/// intact, and the error is `databaseCorrupt` with the advice to restore the file, never a key
/// error whose remedy (a reset) would throw away an intact key.
enum KeyCheck {
    static let plaintext = Array("tokenstore key check v1".utf8)

    static func seal(storeID: [UInt8], key: DataKey) -> [UInt8] {
        plaintext.withUnsafeBytes {
            Sealer.seal($0, key: key, binding: .init(storeID: storeID, keyID: key.keyID, kind: .keyCheck, rowKey: key.keyID))
        }
    }

    /// Whether `blob` is the key check of `key` in store `storeID`.
    static func opens(_ blob: [UInt8], storeID: [UInt8], key: DataKey) -> Bool {
        let binding = Sealer.Binding(storeID: storeID, keyID: key.keyID, kind: .keyCheck, rowKey: key.keyID)
        guard let opened = try? Sealer.open(blob, key: key, binding: binding) else { return false }  // not opening is the answer
        return opened.copyBytes() == plaintext
    }

    /// The key `keyID` made from `material` under the scheme its row records, checked against
    /// its key check.
    /// - Throws: as ``verify(database:storeID:key:)``.
    static func checkedKey(database: Database, storeID: [UInt8], keyID: [UInt8], material: SecretBytes) throws -> DataKey {
        // A store older than schema version 8 (opened by a test at its version) has legacy keys only.
        let schemeCode =
            try hasSchemeColumn(database)
            ? try database.firstRow("SELECT scheme FROM data_keys WHERE key_id = ?", [.blob(keyID)]) { $0.int(0) }
            : KeyScheme.legacy.rawValue
        // An unknown scheme is damaged metadata: check under the current one, which fails and says so.
        let key = try DataKey(keyID: keyID, material: material, scheme: schemeCode.flatMap(KeyScheme.init(rawValue:)) ?? .current)
        try verify(database: database, storeID: storeID, key: key)
        return key
    }

    /// Whether `data_keys` has its `scheme` column (schema version 8 and later).
    static func hasSchemeColumn(_ database: Database) throws -> Bool {
        (try database.scalarInt("SELECT count(*) FROM pragma_table_info('data_keys') WHERE name = 'scheme'") ?? 0) > 0
    }

    /// Checks `key` against its row's key check.
    /// - Throws: `dataKeyMissing` (no row), `databaseCorrupt` (the key check or the row is
    ///   damaged but the key still opens the store), `dataKeyCorrupt` (the key does not open
    ///   the store: a different key).
    static func verify(database: Database, storeID: [UInt8], key: DataKey) throws {
        guard let check = try database.firstRow("SELECT key_check FROM data_keys WHERE key_id = ?", [.blob(key.keyID)], { $0.blob(0) }) else {
            throw TokenStoreError(.dataKeyMissing, "The store has no record of its data key.")
        }
        if opens(check, storeID: storeID, key: key) { return }
        if try keyStillOpensStore(database: database, storeID: storeID, keyID: key.keyID, material: key.material) {
            throw damagedMetadata()
        }
        throw TokenStoreError(
            .dataKeyCorrupt, "The key provider returned a key that does not open this store.",
            hint: "The keyring holds a different key under this store's id; restore the right one, or restore the database file from a backup.")
    }

    /// Whether `material`, filed as key `keyID`, opens this store in any scheme: some row's key
    /// check, or a sealed item recorded under that key id.
    static func keyStillOpensStore(database: Database, storeID: [UInt8], keyID: [UInt8], material: SecretBytes) throws -> Bool {
        let keys = try [KeyScheme.derived, .legacy].map { try DataKey(keyID: keyID, material: material, scheme: $0) }
        var checks: [[UInt8]] = []
        try database.forEachRow("SELECT key_check FROM data_keys") { checks.append($0.blob(0)) }
        for key in keys where checks.contains(where: { opens($0, storeID: storeID, key: key) }) { return true }
        // The key check itself may be what was damaged: try a few sealed items under the key.
        var items: [(lookup: [UInt8], sealed: [UInt8])] = []
        try database.forEachRow("SELECT lookup, sealed FROM items WHERE key_id = ? LIMIT 3", [.blob(keyID)]) {
            items.append(($0.blob(0), $0.blob(1)))
        }
        for key in keys {
            for item in items {
                let binding = Sealer.Binding(storeID: storeID, keyID: keyID, kind: .item, rowKey: item.lookup)
                if (try? Sealer.open(item.sealed, key: key, binding: binding)) != nil { return true }  // not opening is the answer
            }
        }
        return false
    }

    /// The error for a store whose key records are gone or unusable: `databaseCorrupt` when a
    /// key item the store names (under any status) is in the key provider and still opens the
    /// store, otherwise `dataKeyMissing`.
    /// - Throws: the key provider's errors (`keyringLocked`…): a provider that cannot look
    ///   never makes a key "missing".
    static func missingKeyError(
        database: Database, provider: any KeyProvider, storeID: [UInt8], appID: String
    ) throws -> TokenStoreError {
        var keyIDs: [[UInt8]] = []
        try database.forEachRow("SELECT key_id FROM data_keys") { keyIDs.append($0.blob(0)) }
        for keyID in keyIDs where !(provider is any InStoreKeySlotProvider) {
            let reference = DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
            guard let material = try provider.loadKey(reference), material.count == DataKey.byteCount else { continue }
            if try keyStillOpensStore(database: database, storeID: storeID, keyID: keyID, material: material) {
                // The key is intact where the store's first slot files it, and the slots recorded for
                // this provider do not lead to it: the slot rows were altered.
                return try KeySlots.unchecked(database).isEmpty ? damagedMetadata() : KeySlots.altered()
            }
        }
        if let others = KeySlotOpening.otherSlotsHint(database, except: provider.kind) {
            return TokenStoreError(
                .dataKeyMissing,
                "The store's data key is missing from the key provider (\(provider.name)), but the store has other key slots.",
                hint: others)
        }
        return TokenStoreError(
            .dataKeyMissing,
            "The store's data key is missing from the key provider (\(provider.name)); its sealed rows cannot be opened.",
            hint: "Restore the keyring that held the key (or the database file, if it is the damaged part); reset the store (resetStore) only when neither can be restored.")
    }

    static func damagedMetadata() -> TokenStoreError {
        TokenStoreError(
            .databaseCorrupt,
            "The store's key records in the database are damaged, but its data key is intact in the key provider.",
            hint: "Restore the database file from a backup. Do not reset the store: its key still opens it.")
    }
}
