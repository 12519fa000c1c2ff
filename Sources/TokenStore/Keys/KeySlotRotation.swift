import FoundationEssentials

/// How a store's key slots (``KeySlots``) follow a data-key rotation (``KeyRotation``).
///
/// - A slot with a box (schema version 17) gets the new data key sealed to its public key in
///   the switch: no slot secret is needed.
/// - Where the slot's provider needs nobody (the keyring, the portal, the TPM; or it is the
///   provider the store is open with), the slot also gets a **new key pair**: its secret half is
///   filed by the provider under a new key id before the switch, and the old one is deleted
///   after it, so that a copy of the file from before the rotation opens with no key that is
///   left there. A slot whose secret only the user has (a recovery key, a TPM PIN, a passphrase
///   the store is not open with) keeps its key pair: such a copy still opens with that secret.
/// - The store's first slot, which keeps the data key itself, follows when the store is open
///   with its provider (the new key is filed under its id, as without slots). Any other slot
///   without a box (added at schema version 16) cannot follow: the rotation is refused, and the
///   slot can be removed and added again.
struct KeySlotRotation {
    let connection: StoreConnection
    private var logger: TokenStoreLogger { connection.logger }

    /// A slot's new key pair, recorded before its provider files the secret half.
    struct NewSlotKey {
        let slotID: Int64
        let keyRef: [UInt8]
        let publicKey: [UInt8]
    }

    // MARK: - Before the new key

    /// Refuses a rotation that a slot cannot follow (`invalidInput`, nothing changed); returns
    /// whether the provider the store is open with keeps the data key itself (the store has no
    /// slot row, or its first slot is of that provider and keeps the key), and so files the new
    /// key under its id.
    func plan() throws -> Bool {
        try connection.read { db, envelope in
            let rows = try KeySlots.check(db, envelope: envelope)
            guard !rows.isEmpty else { return true }
            var providerKeepsKey = false
            for row in rows where row.box == nil {
                if keepsDataKey(row, activeKeyID: envelope.keyID) {
                    providerKeepsKey = true
                    continue
                }
                let clipped = KeyProviderKind.clipped(row.kind.rawValue)
                let hint = row.kind == connection.keyProvider.kind || row.keyRef != envelope.keyID
                    ? "Remove it and add it again (tokenctl slot remove \(row.id); tokenctl slot add \(clipped)): a slot added now follows key rotations."
                    : "Open the store with that slot's provider (\(KeySlotOpening.openingOption(row.kind))) to replace the key."
                throw TokenStoreError(
                    .invalidInput,
                    "Key slot \(row.id) (\(clipped)) keeps the data key itself, so a new data key would leave it behind; the key was not replaced.",
                    hint: hint)
            }
            return providerKeepsKey
        }
    }

    /// Whether `row` is the slot whose provider keeps the data key itself under the active
    /// key's id, and the store is open with that provider (which files the new key likewise).
    private func keepsDataKey(_ row: KeySlots.Row, activeKeyID: [UInt8]) -> Bool {
        row.box == nil && row.sealed == nil && row.kind == connection.keyProvider.kind && row.keyRef == activeKeyID
            && !(connection.keyProvider is any InStoreKeySlotProvider)
    }

    /// The provider that files a new key pair for `row` without asking anyone: the store's
    /// own when the slot is of its kind, else one made for a kind that needs nobody; nil for a
    /// slot only its user can reach (a recovery key, a TPM PIN, another passphrase).
    private func unattendedProvider(for kind: KeyProviderKind) -> (any KeyProvider)? {
        let own = connection.keyProvider
        if kind == own.kind { return own is any InStoreKeySlotProvider ? nil : own }
        guard let traits = kind.traits, !traits.capabilities.contains(.asksForPassphrase) else { return nil }
        return traits.make?(connection.path)
    }

    /// Step 1, after the `next` record: gives every boxed slot that an unattended provider keeps
    /// a new key pair, recorded (under the active key's MAC) before the provider files it, so a
    /// roll-back finds what to delete. Returns the ids of the slots that keep their key pair.
    func fileNewSlotKeys() throws -> [Int64] {
        let rows = try connection.read { db, envelope in try KeySlots.hasBoxes(db) ? KeySlots.check(db, envelope: envelope) : [] }
        var kept: [Int64] = []
        for row in rows where row.box != nil {
            guard let provider = unattendedProvider(for: row.kind) else {
                kept.append(row.id)
                continue
            }
            let pair = SlotBox.keyPair()
            let newSlotKey = NewSlotKey(slotID: row.id, keyRef: SecretBytes.random(count: 16).copyBytes(), publicKey: pair.publicKey)
            try connection.write { db, envelope in
                try db.run(
                    "INSERT INTO rotation_slot_keys(slot_id, key_ref, public_key, mac) VALUES (?, ?, ?, ?)",
                    [.int(newSlotKey.slotID), .blob(newSlotKey.keyRef), .blob(newSlotKey.publicKey),
                     .blob(Self.mac(newSlotKey, envelope: envelope))])
            }
            try provider.storeKey(pair.secretKey, for: reference(newSlotKey.keyRef))
            CrashPoint.reach("rotate.afterSlotKey")
        }
        return kept
    }

    /// A roll-back: deletes the new slot keys from their providers, then their records. A
    /// record that fails its MAC names nothing to delete (a provider's key is never deleted on
    /// the word of an unauthenticated row).
    func rollBack() throws {
        let recorded: [(NewSlotKey, KeyProviderKind)] = try connection.read { db, envelope in
            guard try KeySlots.hasBoxes(db) else { return [] }
            let kinds = Dictionary(uniqueKeysWithValues: try KeySlots.unchecked(db).map { ($0.id, $0.kind) })
            return try Self.newSlotKeys(db, envelope: envelope).values.compactMap { key in kinds[key.slotID].map { (key, $0) } }
        }
        for (newSlotKey, kind) in recorded {
            guard let provider = unattendedProvider(for: kind) else { continue }
            try provider.deleteKey(reference(newSlotKey.keyRef))
        }
        try connection.write { db, _ in
            if try KeySlots.hasBoxes(db) { try db.run("DELETE FROM rotation_slot_keys") }
        }
    }

    // MARK: - The switch

    /// Inside the switch's transaction: each slot row re-written for `next` (a boxed slot's box
    /// re-sealed, to its new key pair when it has one; the first slot's key id moved to the
    /// new key's), re-MAC'd under `next` with the set; the replaced slot keys recorded as retired.
    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope, openKind: KeyProviderKind) throws {
        guard try KeySlots.hasTables(db) else { return }
        let rows = try KeySlots.check(db, envelope: current)
        let boxes = try KeySlots.hasBoxes(db)
        guard !rows.isEmpty else {
            if boxes { try db.run("DELETE FROM rotation_slot_keys") }
            return
        }
        let fresh = boxes ? try newSlotKeys(db, envelope: current) : [:]
        for row in rows {
            var keyRef = row.keyRef
            var box = row.box
            if let old = row.box {
                let publicKey = fresh[row.id]?.publicKey ?? old.publicKey
                if let newSlotKey = fresh[row.id] {
                    keyRef = newSlotKey.keyRef
                    try db.run(
                        "INSERT OR IGNORE INTO retired_slot_keys(kind, key_ref, mac) VALUES (?, ?, ?)",
                        [.text(row.kind.rawValue), .blob(row.keyRef), .blob(retiredMAC(kind: row.kind, keyRef: row.keyRef, envelope: next))])
                }
                let resealed = KeySlots.Box(publicKey: publicKey, boxedKey: try SlotBox.seal(next.key.material, to: publicKey))
                try db.run(
                    "UPDATE key_slot_boxes SET public_key = ?, boxed_key = ? WHERE slot_id = ?",
                    [.blob(resealed.publicKey), .blob(resealed.boxedKey), .int(row.id)])
                box = resealed
            } else if row.kind == openKind, row.keyRef == current.keyID, row.sealed == nil {
                keyRef = next.keyID  // the open provider filed the new key under its id
            } else {
                throw TokenStoreError(.invalidInput, "Key slot \(row.id) cannot follow a new data key; nothing was switched.")
            }
            let updated = KeySlots.Row(
                id: row.id, kind: row.kind, keyRef: keyRef, sealed: row.sealed, createdAt: row.createdAt, mac: [], box: box)
            try db.run(
                "UPDATE key_slots SET key_ref = ?, mac = ? WHERE id = ?",
                [.blob(keyRef), .blob(KeySlots.mac(updated, envelope: next)), .int(row.id)])
        }
        try KeySlots.writeSet(db, envelope: next)
        if boxes { try db.run("DELETE FROM rotation_slot_keys") }
    }

    // MARK: - After the switch

    /// Step 4: deletes the retired slot keys from their providers, then their rows. A key whose
    /// provider cannot be reached now stays recorded (the next rotation or open tries again); a
    /// row that fails its MAC is dropped without deleting anything.
    func deleteRetired() {
        do {
            let retired: [(KeyProviderKind, [UInt8], Bool)] = try connection.read { db, envelope in
                guard try KeySlots.hasBoxes(db) else { return [] }
                var rows: [(KeyProviderKind, [UInt8], Bool)] = []
                try db.forEachRow("SELECT kind, key_ref, mac FROM retired_slot_keys") { row in
                    let kind = KeyProviderKind(rawValue: row.text(0))
                    let keyRef = row.blob(1)
                    rows.append((kind, keyRef, MACField.equal(row.blob(2), Self.retiredMAC(kind: kind, keyRef: keyRef, envelope: envelope))))
                }
                return rows
            }
            for (kind, keyRef, authentic) in retired {
                if authentic {
                    guard let provider = unattendedProvider(for: kind) else { continue }
                    do {
                        try provider.deleteKey(reference(keyRef))
                    } catch {
                        logger.info("could not delete a retired key slot key; the next rotation tries again", metadata: ["error": TokenStoreError.code(of: error)])
                        continue
                    }
                } else {
                    logger.info("dropped a retired key slot record that fails its MAC; nothing was deleted for it")
                }
                CrashPoint.reach("rotate.afterSlotKeyDeleted")
                try connection.write { db, _ in
                    try db.run("DELETE FROM retired_slot_keys WHERE kind = ? AND key_ref = ?", [.text(kind.rawValue), .blob(keyRef)])
                }
            }
        } catch {
            logger.info("could not delete the retired key slot keys; the next rotation tries again", metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    // MARK: - Records

    private func reference(_ keyRef: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(connection.storeID), keyID: Hex.encode(keyRef), appID: connection.appID)
    }

    /// The recorded new slot keys whose MAC holds under `envelope`, by slot id.
    private static func newSlotKeys(_ db: Database, envelope: Envelope) throws -> [Int64: NewSlotKey] {
        var out: [Int64: NewSlotKey] = [:]
        try db.forEachRow("SELECT slot_id, key_ref, public_key, mac FROM rotation_slot_keys") { row in
            let newSlotKey = NewSlotKey(slotID: row.int(0), keyRef: row.blob(1), publicKey: row.blob(2))
            if MACField.equal(row.blob(3), mac(newSlotKey, envelope: envelope)) { out[newSlotKey.slotID] = newSlotKey }
        }
        return out
    }

    private static func mac(_ key: NewSlotKey, envelope: Envelope) -> [UInt8] {
        envelope.mac(
            .rotationSlotKeyMAC,
            [MACField.name("rotation_slot_keys"), envelope.storeID, MACField.int(key.slotID), key.keyRef, key.publicKey, envelope.keyID])
    }

    private static func retiredMAC(kind: KeyProviderKind, keyRef: [UInt8], envelope: Envelope) -> [UInt8] {
        envelope.mac(
            .retiredSlotKeyMAC,
            [MACField.name("retired_slot_keys"), envelope.storeID, Array(kind.rawValue.utf8), keyRef, envelope.keyID])
    }
}
