import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One open store: its connection, the envelope of its active key, and the lock that
/// serializes every call on them.
///
/// `read` and `write` lend the connection and the envelope to a closure for one transaction;
/// neither escapes it. Before the closure runs, a key rotation that another store object
/// finished meanwhile is followed, so the envelope is always the store's active key.
final class StoreConnection: @unchecked Sendable {  // mutable state is behind `lock` (and `currentKey`'s mutex for `envelope`)
    let path: String
    let appID: String
    let keyProvider: any KeyProvider
    let options: TokenStore.Options
    let logger: TokenStoreLogger
    /// The scheme of the keys this connection makes; a store whose active key is older is
    /// upgraded by a rotation (``TokenStore/performOwedMaintenance()``).
    let newKeyScheme: KeyScheme

    let lock = StoreLock()
    /// The envelope of the active key, for ``envelope``, which must answer even from inside a
    /// callback; it changes only with `lock` held too. nil while the store is locked here (the
    /// key wiped: see ``StoreConnection/lockHere(_:)``).
    let currentKey: Locked<Envelope?>
    /// With `lock` held, inside a transaction that passed ``unlockedEnvelope(_:)``: the active key.
    var current: Envelope { currentKey.withLock { $0! } }
    /// The store's random id (bound into every sealed value; known while locked too).
    let storeID: [UInt8]
    /// The id of the active key, or of the last one before the store was locked.
    let lastKeyID: Locked<[UInt8]>
    /// Why the store is locked here (``LockReason``'s raw value; 0: unlocked). The read path's
    /// lock check is this one atomic load.
    let lockState = Atomic<UInt8>(0)
    /// Monotonic nanoseconds of the last read or write (kept only with ``TokenStore/Options/lockAfterIdle``).
    let lastUse = Atomic<UInt64>(0)
    /// The access policy in force (the recorded one, or a stronger one asked at open); with `lock` held.
    var accessPolicy: AccessPolicy = .afterFirstUnlock {
        didSet {
            if case .userPresence = accessPolicy { underPresencePolicy.store(true, ordering: .releasing) } else {
                underPresencePolicy.store(false, ordering: .releasing)
            }
            followAccessPolicy()
        }
    }
    /// Whether ``accessPolicy`` is ``AccessPolicy/userPresence(_:)`` (readable without `lock`).
    let underPresencePolicy = Atomic<Bool>(false)
    /// One authorization of the user's presence not used yet (``AccessPolicy/UserPresence/always``:
    /// each lets one read through).
    let presenceTicket = Atomic<Bool>(false)
    /// The session lock this object follows (its policy is or was ``AccessPolicy/whenUnlocked``); with `lock` held.
    var sessionLock: SessionLockSource?
    /// The connection; nil once closed. With `lock` held.
    private(set) var database: Database?
    /// An epoch the key provider could not be raised to after its commit, tried again after
    /// the next write (and at the next open, which heals it); with `lock` held.
    private var epochOwed: UInt64?
    /// `PRAGMA data_version` when the active key was last confirmed: unchanged means no other
    /// connection committed since, so no key switch can have happened.
    var confirmedDataVersion: Int64?
    /// The pager's data version (``Database/pagerDataVersion()``) of the last read that took the
    /// checked path: a read that finds it unchanged after its body ran used the key in hand on a
    /// file nothing has committed to since (see ``readRepeatable(_:)``).
    private var confirmedPagerVersion: UInt32?
    /// Checkpoints held back by a reader since the last one that finished (see ``checkpointQuietly()``).
    private var owedCheckpoints = 0
    /// Whether the schema has the change log (schema 14; a store never loses it once it has it).
    private var logsChanges = false
    /// The subscribers to this store's changes and the watcher serving them (``TokenStore/changes``).
    let changeHub = ChangeHub()

    init(
        path: String, appID: String, keyProvider: any KeyProvider, options: TokenStore.Options,
        logger: TokenStoreLogger, database: Database, envelope: Envelope, newKeyScheme: KeyScheme = .current
    ) {
        self.newKeyScheme = newKeyScheme
        self.path = path
        self.appID = appID
        self.keyProvider = keyProvider
        self.options = options
        self.logger = logger
        self.database = database
        currentKey = Locked(envelope)
        storeID = envelope.storeID
        lastKeyID = Locked(envelope.keyID)
    }

    /// The envelope of the active key (readable from inside a callback of this store). For tests:
    /// it traps while the store is locked; the library reads ``activeEnvelope``.
    var envelope: Envelope { current }

    /// The envelope of the active key; nil while the store is locked here.
    var activeEnvelope: Envelope? { currentKey.withLock { $0 } }

    /// Closes the connection; later calls throw `storeClosed`.
    /// - Throws: `invalidInput` from inside a callback of this store.
    func close() throws {
        try lock.withLock {
            if database != nil, let owed = epochOwed { publishEpoch(owed) }  // best effort: the next open heals it too
            database = nil
        }
        changeHub.close()
    }

    /// Runs `body` with the connection, serialized with every other call on this store.
    /// - Throws: `storeClosed`; `invalidInput` when called from inside a callback of this store.
    func withDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        try lock.withLock {
            guard let database else { throw TokenStoreError(.storeClosed, "The store was closed.") }
            return try body(database)
        }
    }

    /// A write transaction (`BEGIN IMMEDIATE`), serialized, under the active key.
    /// What it owes after its commit runs as work it registered (``Database/afterCommit(_:)``):
    /// the key provider's epoch raise when it raised the file's, an owed epoch or checkpoint
    /// retried, the checkpoint its removal of secrets owes (``checkpointAfterCommit(_:)``).
    func write<T>(_ body: (Database, Envelope) throws -> T) throws -> T {
        try refuseIfReadOnly()
        try refuseIfLockedHere()
        return try withDatabase { db in try transaction(db, switchingTo: nil) { try body(db, current) } }
    }

    /// A store opened read-only (``TokenStore/Options/readOnly``) refuses every write, typed.
    private func refuseIfReadOnly() throws {
        guard options.readOnly else { return }
        throw TokenStoreError(.invalidInput, "The store was opened read-only; nothing was written.")
    }

    /// With `lock` held: one write transaction. A transaction whose record changes require an
    /// epoch raise (``EpochRaisingChange``: an outbox entry queued, a user recorded `revoked`,
    /// local entries cleared, a key switch) raises it once here, before the commit, under
    /// `next` when the transaction switches to that key. One whose records removed secrets
    /// (``SecretRemovalObserver``) records the crypto-erase owed when none is left and
    /// checkpoints after its commit. Every write retries, after its commit, an epoch or a
    /// checkpoint still owed.
    private func transaction<T>(_ db: Database, switchingTo next: Envelope?, _ body: () throws -> T) throws -> T {
        try db.writeTransaction {
            _ = try unlockedEnvelope(db)
            if let next {
                let key = next.key
                db.afterCommit { [self] _ in activate(key) }
            }
            let value = try body()
            if db.removedSecrets {
                try EraseOwed.markIfEmpty(db, rotatesKeyAfterLastLogout: options.rotatesKeyAfterLastLogout)
                checkpointAfterCommit(db)
            }
            try logChanges(db, switchingTo: next)
            if db.epochRaiseRequired { try raiseEpoch(db, from: current, to: next) }
            if !db.publishesEpoch, let owed = epochOwed { db.afterCommit { [self] _ in publishEpoch(owed) } }
            if owedCheckpoints > 0 { checkpointAfterCommit(db) }
            return value
        }
    }

    /// With `lock` held, before a commit: the changes the transaction noted go to the change log
    /// (a key switch re-seals the log under `next` and is one of them); once committed, watchers
    /// are woken (``ChangeHub/committed(databasePath:)``).
    private func logChanges(_ db: Database, switchingTo next: Envelope?) throws {
        guard try logsChanges || ChangeLog.exists(db) else { return }
        logsChanges = true
        if let next {
            try ChangeLog.reseal(db, from: current, to: next)
            db.noteChange(.keyRotated)
        }
        guard !db.notedChanges.isEmpty else { return }
        try ChangeLog.append(db, db.notedChanges, envelope: next ?? current)
        db.afterCommit(once: "changes") { [self] _ in changeHub.committed(databasePath: path) }
    }

    /// Inside a write transaction of this connection: raises the file's epoch by one now,
    /// authenticated under `next` (the active key unless a key switch makes `next` active in
    /// this transaction), and registers the key provider's raise to the same value for after
    /// the commit. A store below schema version 9 has no epoch: nothing happens.
    private func raiseEpoch(_ db: Database, from active: Envelope, to next: Envelope?) throws {
        guard try StoreEpoch.hasColumns(db) else {
            db.afterCommit(publishingEpoch: nil)
            return
        }
        let epoch = try StoreEpoch.read(db, envelope: active) + 1
        try StoreEpoch.write(db, epoch, envelope: next ?? active)
        if db.defersEpochPublication {
            db.afterCommit(publishingEpoch: { [self] _ in epochOwed = max(epoch, epochOwed ?? 0) })
        } else {
            db.afterCommit(publishingEpoch: { [self] _ in publishEpoch(epoch) })
        }
    }

    /// Makes the key provider's epoch write still owed, if any (a raise deferred by its
    /// transaction, or one that failed after its commit); nothing when none is owed.
    func publishOwedEpoch() throws {
        try withDatabase { _ in
            if let owed = epochOwed { publishEpoch(owed) }
        }
    }

    /// With `lock` held, after a commit: raises the key provider's epoch to `epoch` (or to one
    /// still owed, if higher). A failure is logged, not thrown (the change has committed): the
    /// epoch stays owed, retried after the next write and healed at the next open.
    private func publishEpoch(_ epoch: UInt64) {
        let epoch = max(epoch, epochOwed ?? 0)
        CrashPoint.reach("epoch.afterFileRaise")
        do {
            try keyProvider.raiseStoreEpoch(storeID: Hex.encode(storeID), appID: appID, to: epoch)
            epochOwed = nil
        } catch {
            epochOwed = epoch
            logger.info(
                "could not raise the key provider's store epoch after a commit; owed until the next write or open",
                metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    /// A read transaction (one snapshot), serialized, under the active key.
    func read<T>(_ body: (Database, Envelope) throws -> T) throws -> T {
        try refuseIfLockedHere()
        return try withDatabase { db in
            try db.readTransaction { try checkedRead(db, body) }
        }
    }

    /// ``read(_:)`` for a body that has no effect but its result (a look-up): it may run twice.
    ///
    /// When the last read confirmed the key and the store is not locked, the body runs first
    /// with the key in hand and without a transaction (each statement its own snapshot, no
    /// BEGIN or COMMIT); the pager's data version, read after the body, then says whether
    /// anything committed to the file since that confirmation. SQLite moves it when one of this
    /// connection's reads begins on a file that changed, and at its own commits. Unchanged: every
    /// statement of the body read the file as it was at the confirmation (one snapshot, in
    /// effect), nothing can have switched the key, locked the store elsewhere or changed its
    /// policy, and the result stands. Changed (another process wrote, or this one did): what
    /// the body returned or threw is dropped, and the checked path runs it again in a read
    /// transaction.
    func readRepeatable<T>(_ body: (Database, Envelope) throws -> T) throws -> T {
        try refuseIfLockedHere()
        return try withDatabase { db in
            if let confirmed = confirmedPagerVersion, confirmedDataVersion != nil, !db.isInTransaction,
                lockState.load(ordering: .acquiring) == LockReason.unlocked.rawValue,
                let envelope = currentKey.withLock({ $0 })
            {
                let result = Result { try body(db, envelope) }
                if db.pagerDataVersion() == confirmed { return try result.get() }
            }
            return try db.readTransaction { try checkedRead(db, body) }
        }
    }

    /// Inside a read transaction: the body under the envelope ``unlockedEnvelope(_:)`` checked,
    /// and the pager's data version noted for ``readRepeatable(_:)``.
    private func checkedRead<T>(_ db: Database, _ body: (Database, Envelope) throws -> T) throws -> T {
        let result = try body(db, try unlockedEnvelope(db))
        confirmedPagerVersion = confirmedDataVersion == nil ? nil : db.pagerDataVersion()
        return result
    }

    /// A write transaction that switches the store to `key`: once it has committed, `key` is
    /// the active key of this connection too. Its body reports ``EpochRaisingChange/keySwitched``;
    /// the epoch is raised under `key`.
    func write<T>(switchingTo key: DataKey, _ body: (Database, Envelope) throws -> T) throws -> T {
        try refuseIfReadOnly()
        try refuseIfLockedHere()
        return try withDatabase { db in
            try transaction(db, switchingTo: Envelope(storeID: storeID, key: key)) { try body(db, current) }
        }
    }

    /// Inside a write transaction of this connection: a WAL checkpoint runs once it has
    /// committed (a transaction that deleted ciphertext asks for one, so it does not linger in
    /// the -wal file); asked twice, it runs once.
    func checkpointAfterCommit(_ db: Database) {
        db.afterCommit(once: "checkpoint") { [self] db in checkpoint(db) }
    }

    /// Moves WAL content into the main file so deleted ciphertext does not linger in -wal.
    ///
    /// It never waits: while another connection holds a read transaction the checkpoint stops
    /// where that reader's snapshot begins, and the ciphertext that snapshot may still need
    /// stays in the file and the WAL. Such a checkpoint is counted as owed (logged with the
    /// count, see ``checkpointsOwed``) and tried again after the next write and at the next
    /// open. A checkpoint that fails is logged, never thrown: it runs after a commit, which
    /// has succeeded.
    func checkpointQuietly() {
        do {
            try withDatabase { db in checkpoint(db) }
        } catch {
            logger.info(
                "WAL checkpoint after a commit failed; the next one catches up", metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    /// Checkpoints not finished because a reader held them back, since the last one that finished.
    /// - Throws: `storeClosed`.
    func checkpointsOwed() throws -> Int { try withDatabase { _ in owedCheckpoints } }

    /// With `lock` held: one non-blocking checkpoint, counting it as owed when held back.
    private func checkpoint(_ db: Database) {
        do {
            if try db.checkpoint() {
                if owedCheckpoints > 0 {
                    logger.info("finished the WAL checkpoint a reader had held back", metadata: ["checkpoints.owed": "0"])
                }
                owedCheckpoints = 0
            } else {
                owedCheckpoints += 1
                logger.info(
                    "WAL checkpoint held back by another connection's read transaction; owed until the next write or open",
                    metadata: ["checkpoints.owed": "\(owedCheckpoints)"])
            }
        } catch {
            owedCheckpoints += 1
            logger.info(
                "WAL checkpoint failed; owed until the next write or open",
                metadata: ["error": TokenStoreError.code(of: error), "checkpoints.owed": "\(owedCheckpoints)"])
        }
    }

    /// At open: a WAL left with content (a checkpoint another process could not finish, or a
    /// crash) is checkpointed now, without waiting.
    func checkpointLeftoverWAL() {
        var info = stat()
        guard lstat(path + "-wal", &info) == 0, info.st_size > 0 else { return }
        checkpointQuietly()
    }

    /// Makes `key` the active one. Called with `lock` held, after the transaction that switched to it.
    func activate(_ key: DataKey) {
        currentKey.withLock { $0 = Envelope(storeID: storeID, key: key) }
        lastKeyID.withLock { $0 = key.keyID }
        confirmedDataVersion = nil
    }

    /// The reference the key provider files key `keyID` of this store under.
    func reference(_ keyID: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyID), appID: appID)
    }

    /// The key `keyID` from the key provider, checked against its key check; nil when the
    /// provider has none.
    func loadKey(_ db: Database, keyID: [UInt8], filedUnderItsID: Bool = false) throws -> DataKey? {
        let loaded: SecretBytes?
        if filedUnderItsID {
            // A rotation's next key: filed under its own id by a provider that keeps the data key
            // itself, or nowhere (a store whose slots all have boxes; a recovery key, a TPM PIN).
            loaded = keyProvider is any InStoreKeySlotProvider ? nil : try keyProvider.loadKey(reference(keyID))
        } else {
            // Through the key slots of this provider's kind (a store without any: under the key's id).
            loaded = try KeySlotOpening(database: db, provider: keyProvider, appID: appID).loadKey(storeID: storeID, keyID: keyID).key
        }
        guard let material = loaded else { return nil }
        return try KeyCheck.checkedKey(database: db, storeID: storeID, keyID: keyID, material: material)
    }

    /// Inside a transaction: if another store object switched the store to a new key, load
    /// it (from the key provider, checked against its key check) and use it from now on.
    /// Skipped when no other connection has committed since the key was last confirmed.
    func followKeyRotation(_ db: Database, dataVersion version: Int64) throws {
        guard let active = try DataKeyRecords.activeKeyID(db) else {
            throw TokenStoreError(
                .dataKeyMissing, "The store records no active data key any more (it was reset or destroyed meanwhile).",
                hint: "Open the store again.")
        }
        if active != current.keyID {
            guard let key = try loadKey(db, keyID: active) else {
                throw TokenStoreError(
                    .dataKeyMissing, "The store's new data key is missing from the key provider (\(keyProvider.name)).",
                    hint: "Restore the keyring that held the key, or reset the store explicitly (resetStore) to start over.")
            }
            activate(key)
            logger.info("followed a key rotation made by another store object")
        }
        confirmedDataVersion = version
    }
}
