import FoundationEssentials

extension TokenStore {
    /// The credential state of an Apple user id: `authorized`, `revoked`, or `notFound`.
    /// - Throws: `invalidInput` for an empty or oversize id; storage errors.
    public func credentialState(forUserID userID: String) throws -> CredentialState {
        try Self.validate(userID: userID)
        return try connection.readRepeatable { db, envelope in try CredentialRecord.state(db, userID: userID, envelope: envelope) }
    }

    /// Records a change of credential state with its reason (and an optional detail code).
    /// Recording the state a user already has with the same reason and detail adds nothing.
    /// Recording `revoked` raises the store epoch, so a copy of the file from before it opens
    /// as `storeRolledBack` (see <doc:StoreEpoch>).
    /// - Throws: `invalidInput` (reason/detail not a short code), storage errors.
    package func recordCredentialState(
        _ state: CredentialState, forUserID userID: String, reason: CredentialStateReason, detail: String? = nil
    ) throws {
        try Self.validate(userID: userID)
        try connection.write { db, envelope in
            // A `revoked` entry raises the epoch in the record layer (CredentialHistory.append).
            try CredentialRecord.record(db, userID: userID, to: state, reason: reason, detail: detail, envelope: envelope)
        }
    }

    /// Every recorded change for an Apple user id, oldest first.
    public func credentialStateHistory(forUserID userID: String) throws -> [CredentialStateTransition] {
        try Self.validate(userID: userID)
        return try connection.read { db, envelope in try CredentialRecord.history(db, userID: userID, envelope: envelope) }
    }
}
