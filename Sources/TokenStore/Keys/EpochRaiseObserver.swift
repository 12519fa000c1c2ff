import FoundationEssentials

/// The epoch bookkeeping of one write transaction (see ``EpochRaisingChange``): the changes the
/// record layer reported that a rollback must not undo, and whether the transaction's owner
/// (``StoreConnection``) raised the store epoch and registered its publication. Attached to the
/// transaction at the first report or registration; before the commit it refuses a transaction
/// that reported a change and did not raise the epoch.
final class EpochRaiseObserver: TransactionObserver {
    fileprivate(set) var changes: Set<EpochRaisingChange> = []
    fileprivate(set) var publishes = false
    fileprivate(set) var defersPublication = false

    /// A record change that needs the epoch raised, in a transaction whose owner did not raise
    /// it (and register its publication), is a programming error: refused rather than committed
    /// unprotected.
    func databaseWillCommit(_ db: Database) throws {
        guard changes.isEmpty || publishes else {
            throw TokenStoreError(
                .ioError, "Internal error: a change that raises the store epoch was made outside a store transaction; nothing was changed.")
        }
    }
}

extension Database {
    /// The changes of the write transaction running now that require the epoch raised.
    var epochRaisingChanges: Set<EpochRaisingChange> { attachedObserver(EpochRaiseObserver.self)?.changes ?? [] }
    /// Whether the transaction running now raised the epoch and registered its publication
    /// (``afterCommit(publishingEpoch:)``).
    var publishesEpoch: Bool { attachedObserver(EpochRaiseObserver.self)?.publishes ?? false }
    /// Whether a change of the transaction running now requires the epoch raised.
    var epochRaiseRequired: Bool { !epochRaisingChanges.isEmpty }

    /// Inside a write transaction: the change being made must raise the store epoch (see
    /// ``EpochRaisingChange``). Called by the record layer, never by a session call site.
    func requireEpochRaise(_ change: EpochRaisingChange) {
        precondition(isInTransaction, "an epoch raise required outside a transaction")
        transactionObserver(EpochRaiseObserver.init).changes.insert(change)
    }

    /// Inside a write transaction: runs `body`, whose record changes need no epoch raise of
    /// their own: they finish an operation whose first step raised it (see
    /// ``EpochRaisingChange``, "covered"). Changes made before or after `body` still count.
    func coveringEpochRaise<T>(_ body: () throws -> T) rethrows -> T {
        let before = epochRaisingChanges
        let value = try body()
        attachedObserver(EpochRaiseObserver.self)?.changes = before
        return value
    }

    /// Inside a write transaction: its epoch raise, if it makes one, is published later
    /// (``StoreConnection/publishOwedEpoch()``), not right after the commit.
    func deferEpochPublication() {
        precondition(isInTransaction, "an epoch publication deferred outside a transaction")
        transactionObserver(EpochRaiseObserver.init).defersPublication = true
    }

    /// Whether the transaction running now defers its epoch publication.
    var defersEpochPublication: Bool { attachedObserver(EpochRaiseObserver.self)?.defersPublication ?? false }

    /// Inside a write transaction whose owner has just raised the file's epoch: `publish`
    /// raises the key provider's after the commit (nil: the store has no epoch, below schema
    /// version 9). It is what lets a transaction with ``epochRaisingChanges`` commit.
    func afterCommit(publishingEpoch publish: ((Database) -> Void)?) {
        if let publish { afterCommit(publish) }
        transactionObserver(EpochRaiseObserver.init).publishes = true
    }
}
