extension SecretServiceKeyProvider {
    /// The highest store epoch the Secret Service holds for `storeID`, 0 when it holds none.
    ///
    /// The epoch lives in items of the schema `dev.tokenstore.StoreEpoch` (attributes
    /// `epoch-store-id`, `epoch`, a random `write-id`; see ``raiseStoreEpoch(storeID:appID:to:)``).
    /// - Throws: ``TokenStoreError`` `keyringLocked` (an epoch item, or the default collection
    ///   when none is visible, is locked), `integrityCheckFailed` (an item holds no number),
    ///   `invalidInput`, `secretServiceUnavailable`, `timedOut`, `cancelled`, `ioError`.
    public func storeEpoch(storeID: String) throws -> UInt64 {
        try Self.validateStoreID(storeID)
        return try withInteraction { () throws(TokenStoreError) -> UInt64 in
            try GLibWorkerThread.run("read store epoch", timeout: timeout) { cancellable throws(TokenStoreError) in
                try currentEpoch(storeID, cancellable, operation: "read store epoch").value
            }
        }
    }

    /// A store's open: the data key and the store's epoch in one operation on one worker thread
    /// (``KeyProvider/loadKeyAndStoreEpoch(_:)``). The epoch search comes first; when it finds nothing, the lock
    /// check that follows is answered by the key search that came after it when the key's item
    /// lies in the default collection (found unlocked, so the collection was unlocked after the
    /// epoch search, as the separate check would have seen it), else asked as ``storeEpoch(storeID:)`` does.
    /// The epoch is nil when its read failed (the caller asks ``storeEpoch(storeID:)`` again for
    /// the error, with its own unlock prompt if allowed); never 0 for a keyring it could not read.
    public func loadKeyAndStoreEpoch(_ reference: DataKeyReference) throws -> (key: SecretBytes?, epoch: UInt64?) {
        try loadKeyAndStoreEpoch(reference, expectedLength: Self.keyLength)
    }

    /// As ``loadKeyAndStoreEpoch(_:)``; `expectedLength` nil reads an item of any length (a
    /// TPM-sealed key, ``TPMKeyProvider``).
    func loadKeyAndStoreEpoch(
        _ reference: DataKeyReference, expectedLength: Int?
    ) throws(TokenStoreError) -> (key: SecretBytes?, epoch: UInt64?) {
        let storeID = reference.storeID
        let valid = (try? Self.validateStoreID(storeID)) != nil
        return try withInteraction { () throws(TokenStoreError) -> (key: SecretBytes?, epoch: UInt64?) in
            try GLibWorkerThread.run("load key", timeout: timeout) { cancellable throws(TokenStoreError) in
                var epochFound: SecretServiceEpochItems.Found?
                if valid { epochFound = try? SecretServiceEpochItems.search(storeID, in: backend, cancellable, operation: "read store epoch") }
                // An unreadable item: the caller reads the epoch again on its own (searchEpoch).
                if epochFound?.unreadable.isEmpty == false { epochFound = nil }
                let (key, itemPath) = try loadKeyOnce(reference, cancellable, operation: "load key", expectedLength: expectedLength)
                guard key != nil, let found = epochFound else { return (key, nil) }
                let epoch = try? epochValue(of: found, storeID, unlockedItem: itemPath, cancellable, operation: "read store epoch")
                return (key, epoch?.value)
            }
        }
    }

    /// Raises the store's epoch to `epoch`: stores a new item for the value, then deletes the
    /// items of lower values. Never replaces an item in place, never lowers the epoch (when the
    /// keyring already holds `epoch` or more, nothing is written).
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `integrityCheckFailed`, `invalidInput`,
    ///   `secretServiceUnavailable`, `timedOut`, `cancelled`, `ioError`.
    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        try Self.validateStoreID(storeID)
        // No app id in the label: KWallet keeps labels in clear text (the data key's item,
        // labelled with the app id elsewhere, says whose store this is).
        let label = "TokenStore store epoch"
        try withInteraction { () throws(TokenStoreError) in
            try GLibWorkerThread.run("raise store epoch", timeout: timeout) { cancellable throws(TokenStoreError) in
                let operation = "raise store epoch"
                let found = try searchEpoch(storeID, cancellable, operation: operation)
                let current = try epochValue(of: found, storeID, unlockedItem: nil, cancellable, operation: operation)
                if current.value < epoch {
                    try SecretServiceEpochItems.store(epoch, storeID: storeID, label: label, cancellable, operation: operation)
                }
                let target = max(current.value, epoch)
                for older in Set(current.values) where older < target {
                    try SecretServiceEpochItems.clear(storeID, epoch: older, cancellable, operation: operation)
                }
                for path in found.unreadable {
                    try backend.delete(path, cancellable, operation: operation)
                }
            }
        }
    }

    /// Deletes every epoch item of the store. Succeeds when there is none.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `invalidInput`, `secretServiceUnavailable`,
    ///   `timedOut`, `cancelled`, `ioError` (an item survived the delete).
    public func deleteStoreEpoch(storeID: String) throws {
        try Self.validateStoreID(storeID)
        try withInteraction { () throws(TokenStoreError) in
            try GLibWorkerThread.run("delete store epoch", timeout: timeout) { cancellable throws(TokenStoreError) in
                let operation = "delete store epoch"
                let before = try SecretServiceEpochItems.search(storeID, in: backend, cancellable, operation: operation)
                if before.locked > 0 { throw Self.locked(operation) }
                guard before.count > 0 else { return }
                try SecretServiceEpochItems.clear(storeID, epoch: nil, cancellable, operation: operation)
                let after = try SecretServiceEpochItems.search(storeID, in: backend, cancellable, operation: operation)
                if after.locked > 0 { throw Self.locked(operation) }
                if after.count > 0 {
                    throw TokenStoreError(.ioError, "\(after.count) store-epoch item(s) survived the delete (\(operation)).")
                }
            }
        }
    }

    /// The highest value among the store's epoch items (0 for none) and every value found.
    /// Never "none" when it could not look: a locked item, or a locked default collection
    /// showing nothing, is `keyringLocked`.
    private func currentEpoch(
        _ storeID: String, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> (value: UInt64, values: [UInt64]) {
        let found = try searchEpoch(storeID, cancellable, operation: operation)
        return try epochValue(of: found, storeID, unlockedItem: nil, cancellable, operation: operation)
    }

    /// The store's epoch items. When the service gave no secret for some, they are read once more
    /// on a new connection (a new transfer session); items still without a secret then are ones
    /// KWallet kept from a create that failed (it registers an item before it decrypts the secret
    /// sent with it): they hold no value, so the epoch is that of the others, and a raise deletes them.
    private func searchEpoch(
        _ storeID: String, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> SecretServiceEpochItems.Found {
        let found = try SecretServiceEpochItems.search(storeID, in: backend, cancellable, operation: operation)
        guard !found.unreadable.isEmpty else { return found }
        SecretServiceItems.forgetCachedService()
        return try SecretServiceEpochItems.search(storeID, in: backend, cancellable, operation: operation)
    }

    /// The epoch a search found; when it found nothing, only if the default collection is not
    /// locked (`unlockedItem`: see ``SecretServiceItems/defaultCollectionLocked(unlockedItem:_:operation:)``).
    private func epochValue(
        of found: SecretServiceEpochItems.Found, _ storeID: String, unlockedItem: String?, _ cancellable: GLibCancellable,
        operation: String
    ) throws(TokenStoreError) -> (value: UInt64, values: [UInt64]) {
        if found.locked > 0 { throw Self.locked(operation) }
        if found.count == 0,
            try SecretServiceItems.defaultCollectionLocked(unlockedItem: unlockedItem, in: backend, cancellable, operation: operation) == true
        {
            throw Self.locked(operation)
        }
        return (found.values.max() ?? 0, found.values)
    }

    static func validateStoreID(_ storeID: String) throws(TokenStoreError) {
        guard (1...64).contains(storeID.utf8.count),
            storeID.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { throw TokenStoreError(.invalidInput, "A store id is not lowercase hex.") }
    }
}

extension SecretServiceKeyProvider {
    /// Connects and opens the Secret Service's transfer session in the background
    /// (where the read path has a warm-up: `SecretServiceWarmUp`), bounded by ``timeout``.
    public func beginConnecting() {
        backend.beginWarmUp(timeout: timeout)
    }
}
