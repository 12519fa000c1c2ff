import FoundationEssentials
import Synchronization

/// Why a store object is locked (``StoreConnection/lockState``).
enum LockReason: UInt8, Sendable {
    case unlocked = 0
    /// ``TokenStore/lock(allProcesses:)`` on this object: until ``TokenStore/unlock(allProcesses:)``.
    case here = 1
    /// The store records a lock for every process (`tokenctl lock`): until it is cleared.
    case everywhere = 2
    /// The desktop session is locked (``AccessPolicy/whenUnlocked``): until it unlocks.
    case session = 3
    /// The key was wiped by a session lock that has ended: fetched again at the next call.
    case released = 4
}

extension StoreConnection {
    /// The lock check on the read and write paths: one atomic load. A store locked for every
    /// process is checked again inside the transaction (the record may have been cleared).
    /// - Throws: `storeLocked`.
    func refuseIfLockedHere() throws {
        if options.lockAfterIdle != nil { lastUse.store(Self.monotonicNanos(), ordering: .relaxed) }
        let state = lockState.load(ordering: .acquiring)
        if state == LockReason.here.rawValue || state == LockReason.session.rawValue { throw Self.lockedError(LockReason(rawValue: state)!) }
    }

    static func lockedError(_ reason: LockReason) -> TokenStoreError {
        switch reason {
        case .everywhere:
            return TokenStoreError(
                .storeLocked, "The store is locked for every process; its data key was wiped from this process's memory.",
                hint: "Unlock it (tokenctl unlock, or unlock(allProcesses: true)); the key is then fetched again from its provider.")
        case .session:
            return TokenStoreError(
                .storeLocked, "The desktop session is locked (the store's access policy is whenUnlocked); its data key was wiped from this process's memory.",
                hint: "Unlock the desktop session; the key is then fetched again from its provider at the next call.")
        default:
            return TokenStoreError(
                .storeLocked, "The store is locked; its data key was wiped from this process's memory.",
                hint: "Unlock it (unlock()); the key is then fetched again from its provider.")
        }
    }

    /// With `lock` held, inside a transaction: the active key's envelope. Unchanged `PRAGMA
    /// data_version` and no lock: the key in hand. Otherwise (another connection committed, or
    /// the store is locked for every process) the record is read: a lock set elsewhere wipes the
    /// key here, a lock cleared elsewhere fetches it again from the key provider, a key switch
    /// made elsewhere is followed, and the access policy recorded is taken up.
    /// - Throws: `storeLocked`; `integrityCheckFailed` for an altered record; as ``loadKey(_:keyID:)``.
    func unlockedEnvelope(_ db: Database) throws -> Envelope {
        let version = try db.dataVersion()
        let state = LockReason(rawValue: lockState.load(ordering: .acquiring)) ?? .here
        if state == .unlocked, version == confirmedDataVersion { return current }
        if state == .here || state == .session { throw Self.lockedError(state) }
        if state == .everywhere || state == .released {
            guard try !AccessPolicyRecord.lockedUnchecked(db) else { throw Self.lockedError(.everywhere) }
            try fetchKeyAgain(db)
        }
        try followKeyRotation(db, dataVersion: version)
        let record = try AccessPolicyRecord.check(db, envelope: current)
        accessPolicy = record.policy
        if record.lockedEverywhere {
            wipeKey(.everywhere)
            throw Self.lockedError(.everywhere)
        }
        if lockState.load(ordering: .acquiring) == LockReason.session.rawValue { throw Self.lockedError(.session) }
        setLockState(.unlocked)
        return current
    }

    /// With `lock` held: the active key, loaded again from the key provider and checked.
    /// - Throws: `dataKeyMissing`; as ``loadKey(_:keyID:)``.
    func fetchKeyAgain(_ db: Database) throws {
        guard let active = try DataKeyRecords.activeKeyID(db), let key = try loadKey(db, keyID: active) else {
            throw TokenStoreError(
                .dataKeyMissing, "The store's data key is missing from the key provider (\(keyProvider.name)).",
                hint: "Restore the keyring that held the key, or reset the store explicitly (resetStore) to start over.")
        }
        activate(key)
    }

    /// With `lock` held: drops this object's data key (its guarded memory is wiped and freed with
    /// the last reference: `sodium_free`) and marks the store locked for `reason`. An unlocked
    /// object's change watcher first reads what was committed until now with the key
    /// (``ChangeHub/willLock(_:envelope:)``): its subscribers see those changes before `storeLocked`.
    func wipeKey(_ reason: LockReason) {
        if !isLocked, let database, let envelope = activeEnvelope { changeHub.willLock(database, envelope: envelope) }
        currentKey.withLock { $0 = nil }
        confirmedDataVersion = nil
        setLockState(reason)
    }

    /// With `lock` held: why the store is locked now. A change between locked and unlocked (as
    /// ``isLocked`` tells them) goes to this object's change subscribers, once per transition.
    func setLockState(_ reason: LockReason) {
        let before = lockState.exchange(reason.rawValue, ordering: .acquiringAndReleasing)
        let wasLocked = Self.locks(before), isLocked = Self.locks(reason.rawValue)
        if wasLocked != isLocked { changeHub.lockChanged(locked: isLocked) }
    }

    private static func locks(_ state: UInt8) -> Bool {
        state != LockReason.unlocked.rawValue && state != LockReason.released.rawValue
    }

    /// Locks this object (and with `everywhere`, every process of the store: the record says so,
    /// under its MAC, and each notices it at its next call).
    /// - Throws: `invalidInput` (everywhere on a read-only store); as ``fetchKeyAgain(_:)``.
    func lock(everywhere: Bool) throws {
        if everywhere, options.readOnly {
            throw TokenStoreError(.invalidInput, "The store was opened read-only; it cannot be locked for every process.")
        }
        try withDatabase { db in
            if everywhere {
                try db.writeTransaction {
                    if activeEnvelope == nil { try fetchKeyAgain(db) }
                    let version = try db.dataVersion()
                    if version != confirmedDataVersion { try followKeyRotation(db, dataVersion: version) }
                    var record = try AccessPolicyRecord.check(db, envelope: current)
                    record.lockedEverywhere = true
                    try AccessPolicyRecord.write(db, record, envelope: current)
                }
            }
            wipeKey(everywhere ? .everywhere : .here)
        }
    }

    /// Unlocks this object: its key fetched again from the key provider. A store locked for every
    /// process stays locked unless `everywhere`, which clears the record for every process.
    /// - Throws: `storeLocked` (locked for every process, and not `everywhere`); as ``fetchKeyAgain(_:)``.
    func unlock(everywhere: Bool) throws {
        if everywhere, options.readOnly {
            throw TokenStoreError(.invalidInput, "The store was opened read-only; it cannot be unlocked for every process.")
        }
        try withDatabase { db in
            if sessionLock?.isLocked == true, accessPolicy == .whenUnlocked {
                if lockState.load(ordering: .acquiring) != LockReason.here.rawValue { wipeKey(.session) }
                throw Self.lockedError(.session)
            }
            let body = {
                try self.fetchKeyAgain(db)
                var record = try AccessPolicyRecord.check(db, envelope: self.current)
                if record.lockedEverywhere {
                    guard everywhere else {
                        self.wipeKey(.everywhere)
                        throw Self.lockedError(.everywhere)
                    }
                    record.lockedEverywhere = false
                    try AccessPolicyRecord.write(db, record, envelope: self.current)
                }
                self.setLockState(.unlocked)
                self.accessPolicy = record.policy  // a whenUnlocked policy taken up here follows the session from now on
                self.confirmedDataVersion = nil
                if self.lockState.load(ordering: .acquiring) == LockReason.session.rawValue { throw Self.lockedError(.session) }
            }
            try everywhere ? db.writeTransaction(body) : db.readTransaction(body)
        }
    }

    /// Whether this object is locked now (as its last call found it).
    var isLocked: Bool {
        Self.locks(lockState.load(ordering: .acquiring))
    }
}

extension StoreConnection {
    /// Right after the open: the policy in force, and a store locked for every process locked here
    /// too (its key wiped at once).
    func opened(with access: AccessPolicyRecord.State) {
        try? withDatabase { _ in
            accessPolicy = access.policy
            if access.lockedEverywhere { wipeKey(.everywhere) }
        }
    }
}
