extension SecretServiceKeyProvider {
    /// Reads the item of `reference` whatever its length: the sealed key a ``TPMKeyProvider``
    /// keeps where this provider keeps a raw key (same schema, same `store-id` and `key-id`).
    /// Same errors as ``loadKey(_:)``, less the length check.
    func loadItem(_ reference: DataKeyReference) throws(TokenStoreError) -> SecretBytes? {
        try withInteraction { () throws(TokenStoreError) -> SecretBytes? in
            try GLibWorkerThread.run("load key", timeout: timeout) { cancellable throws(TokenStoreError) in
                try loadKeyOnce(reference, cancellable, operation: "load key", expectedLength: nil).key
            }
        }
    }

    /// Stores `bytes` as the item of `reference` (new item first, then the old one deleted),
    /// as ``storeKey(_:for:)`` does, without its 32-byte check.
    func storeItem(_ bytes: SecretBytes, for reference: DataKeyReference) throws(TokenStoreError) {
        try withInteraction { () throws(TokenStoreError) in
            try GLibWorkerThread.run("store key", timeout: timeout) { cancellable throws(TokenStoreError) in
                try SecretServiceItems.store(bytes, for: reference, in: backend, cancellable, operation: "store key")
            }
        }
    }
}
