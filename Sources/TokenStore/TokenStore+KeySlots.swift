import FoundationEssentials

/// One way to a store's data key, as ``TokenStore/keySlots`` lists it: never its secret.
public struct KeySlot: Sendable, Equatable, Identifiable {
    /// The slot's number in the store (1 for the store's first).
    public let id: Int
    /// The kind of key provider that keeps the key for this slot (`recovery` for a recovery key).
    public let kind: KeyProviderKind
    public let createdAt: Date
}

extension TokenStore {
    /// The store's key slots, by id: the ways its data key can be reached. A store never given a
    /// second slot has one, its key provider's.
    /// - Throws: `integrityCheckFailed` (a slot row was altered), `storeClosed`, storage errors.
    public var keySlots: [KeySlot] {
        get throws {
            try connection.read { db, envelope in
                try KeySlots.effective(db, envelope: envelope, recordedKind: recordedKind(db, envelope))
                    .map { KeySlot(id: Int($0.id), kind: $0.kind, createdAt: Timestamp.date(fromMillis: $0.createdAt)) }
            }
        }
    }

    /// Adds a way to the data key: `provider` keeps the secret half of a key pair made for the
    /// slot (filed under the slot's own id), the store records the slot with the data key
    /// sealed to the public half, raising its epoch. The key stays where it was for every other
    /// slot; no row is re-sealed. A key rotation re-seals the new key to every slot
    /// (``rotateDataKey(batchSize:progress:)``), and gives the slots whose provider needs nobody
    /// a new key pair. Then `provider`'s store epoch is raised to the
    /// file's (an interrupted raise is healed when the store is opened with it).
    ///
    /// ```swift
    /// try store.addKeySlot(PassphraseKeyProvider(storePath: path, passphrase: phrase))
    /// ```
    /// - Returns: the new slot.
    /// - Throws: `invalidInput` (a read-only store, a store below schema version 16), `databaseBusy`
    ///   (a key rotation is unfinished), the provider's errors (nothing is recorded then),
    ///   `storeClosed`, storage errors.
    @discardableResult
    public func addKeySlot(_ provider: any KeyProvider) throws -> KeySlot {
        let keyRef = SecretBytes.random(count: 16).copyBytes()
        var stored: DataKeyReference?
        do {
            let slot = try connection.write { db, envelope -> KeySlot in
                try refuseSlotChange(db)
                _ = try KeySlots.materialize(db, envelope: envelope, recordedKind: recordedKind(db, envelope))
                let reference = DataKeyReference(storeID: Hex.encode(envelope.storeID), keyID: Hex.encode(keyRef), appID: appID)
                // The slot's own key pair: its provider keeps the secret half, the data key is
                // sealed to the public half, so a key rotation reaches the slot without its secret.
                let pair = SlotBox.keyPair()
                let box = KeySlots.Box(publicKey: pair.publicKey, boxedKey: try SlotBox.seal(envelope.key.material, to: pair.publicKey))
                var sealed: [UInt8]?
                if let inStore = provider as? any InStoreKeySlotProvider {
                    sealed = try inStore.wrap(pair.secretKey, reference: reference)
                } else {
                    try provider.storeKey(pair.secretKey, for: reference)
                    stored = reference
                }
                CrashPoint.reach("keySlots.afterStoreKey")
                let now = Timestamp.nowMillis()
                let id = try KeySlots.insert(
                    db, kind: provider.kind, keyRef: keyRef, sealed: sealed, createdAt: now, box: box, envelope: envelope)
                db.requireEpochRaise(.keySlotsChanged)
                return KeySlot(id: Int(id), kind: provider.kind, createdAt: Timestamp.date(fromMillis: now))
            }
            raiseEpoch(of: provider)
            logger.info("added a key slot", metadata: ["key.provider": provider.name, "slot": "\(slot.id)"])
            return slot
        } catch {
            // Not recorded: the key filed for it is taken back (best effort; an orphan item names no secret).
            if let stored { try? provider.deleteKey(stored) }
            throw error
        }
    }

    /// Adds a recovery key slot: a new random ``RecoveryKey`` wraps the data key in the store
    /// (Argon2id at `limits`). Show ``RecoveryKey/text`` to the user once: it is stored nowhere.
    /// - Throws: as ``addKeySlot(_:)``.
    public func addRecoveryKeySlot(limits: PassphraseKeyProvider.Limits = .moderate) throws -> (slot: KeySlot, recoveryKey: RecoveryKey) {
        let recoveryKey = RecoveryKey.generate()
        let slot = try addKeySlot(RecoveryKeyProvider(recoveryKey: recoveryKey, limits: limits))
        return (slot, recoveryKey)
    }

    /// Removes key slot `id`: the store stops recording it (raising its epoch), and then the key
    /// its provider keeps for it is deleted (through `keyProvider` when given, else a provider
    /// made for its kind; a passphrase slot's file from the default key directory). When the
    /// store's recorded key provider was this slot's kind and no other slot of that kind is
    /// left, the record follows the newest remaining slot.
    /// - Throws: `invalidInput` (no such slot, the last slot: a store keeps at least one way in,
    ///   a read-only store), `databaseBusy` (a key rotation is unfinished), `storeClosed`, storage
    ///   errors. A failure to delete the provider's key after the commit is logged, not thrown.
    public func removeKeySlot(_ id: Int, keyProvider given: (any KeyProvider)? = nil) throws {
        let removed = try connection.write { db, envelope -> KeySlots.Row in
            try refuseSlotChange(db)
            let recorded = try recordedKind(db, envelope)
            let rows = try KeySlots.materialize(db, envelope: envelope, recordedKind: recorded)
            guard let row = rows.first(where: { $0.id == Int64(id) }) else {
                throw TokenStoreError(.invalidInput, "The store has no key slot \(id).", hint: "List them with keySlots (tokenctl slot list).")
            }
            guard rows.count > 1 else {
                throw TokenStoreError(
                    .invalidInput, "Key slot \(id) is the store's last way to its data key; it was not removed.",
                    hint: "Add another slot first (addKeySlot; tokenctl slot add KIND).")
            }
            try KeySlots.delete(db, id: row.id, envelope: envelope)
            let left = rows.filter { $0.id != row.id }
            if row.kind == recorded, !left.contains(where: { $0.kind == recorded }) {
                let next = left.last(where: { $0.kind != .recovery }) ?? left[left.count - 1]
                try KeyProviderRecord.write(db, next.kind, envelope: envelope)
            }
            db.requireEpochRaise(.keySlotsChanged)
            return row
        }
        logger.info("removed a key slot", metadata: ["key.provider": removed.kind.rawValue, "slot": "\(id)"])
        CrashPoint.reach("keySlots.afterRemove")
        guard removed.sealed == nil else { return }  // kept in the store only: gone with its row
        let reference = DataKeyReference(storeID: storeIdentifier, keyID: Hex.encode(removed.keyRef), appID: appID)
        let provider = given.flatMap { $0.kind == removed.kind ? $0 : nil } ?? Self.provider(for: removed.kind, storePath: path)
        do {
            try provider?.deleteKey(reference)
        } catch {
            logger.info("could not delete a removed key slot's key from its provider", metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    /// A provider of `kind` that can delete a key filed for this store (no secret needed).
    static func provider(for kind: KeyProviderKind, storePath: String) -> (any KeyProvider)? {
        if kind == .passphrase { return PassphraseKeyProvider(storePath: storePath, passphrase: SecretBytes([])) }
        return kind.traits?.make?(storePath)
    }

    /// The recorded key provider's kind (checked), or the open provider's for a store that records none.
    private func recordedKind(_ db: Database, _ envelope: Envelope) throws -> KeyProviderKind {
        try KeyProviderRecord.check(db, envelope: envelope) ?? keyProvider.kind
    }

    private func refuseSlotChange(_ db: Database) throws {
        guard try KeySlots.hasBoxes(db) else {
            throw TokenStoreError(.invalidInput, "This store's schema has no key slots yet; open it for writing to migrate it.")
        }
        if (try db.scalarInt("SELECT count(*) FROM data_keys WHERE status != 'active'") ?? 0) > 0 {
            throw TokenStoreError(
                .databaseBusy, "A key rotation of this store is unfinished; key slots change only between rotations.",
                hint: "Open the store again (which finishes it), then retry.")
        }
    }

    /// After a slot is added: its provider's epoch raised to the file's (a failure is healed at
    /// the next open with it, which raises a provider left behind).
    private func raiseEpoch(of provider: any KeyProvider) {
        do {
            let epoch = try connection.read { db, envelope in try StoreEpoch.hasColumns(db) ? StoreEpoch.read(db, envelope: envelope) : 0 }
            try provider.raiseStoreEpoch(storeID: storeIdentifier, appID: appID, to: epoch)
        } catch {
            logger.info("could not raise the new key slot's store epoch; its first open does", metadata: ["error": TokenStoreError.code(of: error)])
        }
    }
}
