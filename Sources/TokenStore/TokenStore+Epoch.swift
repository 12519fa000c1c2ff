import FoundationEssentials

extension TokenStore {
    /// The store epoch in the database file and in the key provider (see <doc:StoreEpoch>).
    /// An open store has them equal, unless the key provider could not be raised after a
    /// change (then the file is ahead, and the next open raises the provider).
    /// - Throws: `integrityCheckFailed` (the file's epoch record was altered), the key
    ///   provider's errors (`keyringLocked`, `secretServiceUnavailable`, `timedOut`), `storeClosed`.
    public func epochStatus() throws -> StoreEpochStatus {
        let file = try connection.read { db, envelope in
            try StoreEpoch.hasColumns(db) ? try StoreEpoch.read(db, envelope: envelope) : 0
        }
        return StoreEpochStatus(file: file, keyProvider: try keyProvider.storeEpoch(storeID: storeIdentifier))
    }

    /// Makes the key provider's epoch write this store object still owes: one a logout's first
    /// step left for later (``SessionLedger/beginLogout(account:reason:publishingEpochLater:)``),
    /// or one that failed after its commit. A failure is logged and stays owed, as after a commit.
    /// - Throws: `storeClosed`.
    package func publishOwedEpoch() throws { try connection.publishOwedEpoch() }
}
