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
