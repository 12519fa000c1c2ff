import FoundationEssentials

extension TokenStore {
    /// The access policy in force (see ``AccessPolicy``): the recorded one, or a stronger one
    /// asked at open; as of this object's last call.
    public var accessPolicy: AccessPolicy {
        (try? connection.withDatabase { _ in connection.accessPolicy }) ?? connection.accessPolicy
    }

    /// Whether this object is locked: its data key wiped from memory, every read and write
    /// throwing `storeLocked`. One atomic load; a lock set by another process is seen at this
    /// object's next call.
    public var isLocked: Bool { connection.isLocked }

    /// Locks the store here: the data key (and the subkeys derived from it) is dropped from this
    /// process's guarded memory, which is wiped as it is freed, and every read or write throws
    /// `storeLocked` until ``unlock(allProcesses:)``. With `allProcesses`, the store records the
    /// lock under its MAC, and every process that has it open drops its key at its next call,
    /// until one unlocks it for every process (`tokenctl lock` / `tokenctl unlock`). It also ends
    /// the window of a ``AccessPolicy/userPresence(_:)`` policy (this process's proof and the
    /// login session's): the next gated read asks again.
    /// - Throws: `invalidInput` (allProcesses on a read-only store, or from inside a callback),
    ///   `storeClosed`; with allProcesses, what fetching the key or a write throws.
    public func lock(allProcesses: Bool = false) throws {
        try connection.lock(everywhere: allProcesses)
        // A lock ends the user-presence window: the next read under userPresence asks again.
        PresenceProofs.forget(storeID: connection.storeID)
        logger.info("store locked", metadata: ["scope": allProcesses ? "allProcesses" : "thisObject"])
    }

    /// Unlocks the store here: the data key is fetched again from its key provider (checked
    /// against its key check). A store locked for every process stays locked (`storeLocked`)
    /// unless `allProcesses`, which clears the record so that every process unlocks at its next call.
    /// - Throws: `storeLocked`, `invalidInput`, `storeClosed`; what fetching the key throws
    ///   (`keyringLocked`, `dataKeyMissing`, `secretServiceUnavailable`, …).
    public func unlock(allProcesses: Bool = false) throws {
        try connection.unlock(everywhere: allProcesses)
        logger.info("store unlocked", metadata: ["scope": allProcesses ? "allProcesses" : "thisObject"])
    }

    /// Records `policy` as the store's access policy, weaker or stronger (the deliberate way to
    /// lower it; an open never does).
    /// Lowering a ``AccessPolicy/userPresence(_:)`` policy needs the user's presence, as a
    /// gated read does (within the window, no new prompt).
    /// - Throws: `storeLocked`, `invalidInput` (read-only), `integrityCheckFailed`, what a write
    ///   throws; lowering userPresence: `userPresenceDenied`, `timedOut`, `lockSourceUnavailable`.
    public func setAccessPolicy(_ policy: AccessPolicy) throws {
        try AccessPolicyGate.check(policy)
        try connection.withPresence {
            try connection.write { db, envelope in
                guard try AccessPolicyRecord.hasColumns(db) else {
                    throw TokenStoreError(.migrationRequired, "The store needs a migration before it can record an access policy.")
                }
                var record = try AccessPolicyRecord.check(db, envelope: envelope)
                if case .userPresence = record.policy, policy.isWeaker(than: record.policy) {
                    // Asked as for the refresh token (always gated); the transaction is rolled back meanwhile.
                    try connection.requirePresence(for: .refreshToken, envelope: envelope)
                }
                record.policy = policy
                try AccessPolicyRecord.write(db, record, envelope: envelope)
                db.afterCommit { [connection] _ in connection.accessPolicy = policy }
            }
        }
    }
}
