extension TPMKeyProvider {
    /// A store's open: the sealed item and the epoch in one Secret Service operation (as
    /// ``SecretServiceKeyProvider`` reads its key), then the unseal.
    public func loadKeyAndStoreEpoch(_ reference: DataKeyReference) throws -> (key: SecretBytes?, epoch: UInt64?) {
        let (item, epoch) = try keyring.loadKeyAndStoreEpoch(reference, expectedLength: nil)
        guard let item else { return (nil, epoch) }
        return (try unseal(item), epoch)
    }

    /// Starts connecting to the Secret Service while the database is read (the TPM is asked
    /// only once the sealed item is in hand).
    public func beginConnecting() { keyring.beginConnecting() }
}

extension TPMKeyProvider {
    /// Whether this TPM would open the sealed key of `reference`, without unsealing it: the
    /// sealed item is read, then the blob is loaded under its primary (the persistent SRK when it
    /// is the blob's, else TPM2_CreatePrimary with its name checked against the blob's) and
    /// flushed; the key never leaves the TPM. For `tokenctl status`, which
    /// must say why a TPM store cannot open with the same typed error its open would throw.
    /// - Returns: false when the keyring holds no item for it (the TPM is not asked).
    /// - Throws: `tpmUnavailable`, `tpmMismatch`, `dataKeyCorrupt`, `integrityCheckFailed`, and the
    ///   Secret Service's errors, as ``loadKey(_:)``.
    package func verifySealedKey(_ reference: DataKeyReference) throws -> Bool {
        guard let item = try keyring.loadItem(reference) else { return false }
        let blob = try TPMSealedBlob(decoding: item.copyBytes())
        let logger = logger
        try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) in
            try session.withLoaded(blob, logger: logger) { _, _ throws(TokenStoreError) in }
        }
        return true
    }
}
