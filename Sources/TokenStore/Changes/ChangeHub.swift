internal import CGlibcExtensions
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The subscribers to one store object's changes, and the ``ChangeWatcher`` thread that serves
/// them while there is at least one (none runs otherwise).
///
/// Lock order: `state` may be held while the store's connection is used (a subscription reads
/// its starting point); `running` is held alone, briefly, because a commit of the connection
/// (``committed(databasePath:)``, with the connection's lock held) wakes the watcher through it.
final class ChangeHub: Sendable {
    private struct Subscriber {
        /// The sequence number the subscription starts after.
        let after: Int64
        let delivery: ChangeDelivery
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 1
        /// The newest sequence number the running watcher has handed out.
        var delivered: Int64 = 0
        var closed = false
    }

    private let state = Locked(State())
    private let running = Locked<ChangeWatcher?>(nil)
    /// This object's lock transitions not yet delivered (taken while `running` is held, alone).
    private let lockChanges = Locked<[StoreChange]>([])

    /// Adds a subscriber from the store's state now on, starting the watcher if none runs.
    /// - Returns: the subscription's id, for ``unsubscribe(_:)``.
    /// - Throws: `storeClosed`, the errors of a read of the store (its starting point), and
    ///   `ioError` when the file's folder cannot be watched.
    func subscribe(_ connection: StoreConnection, _ delivery: ChangeDelivery) throws -> UInt64 {
        try state.withLock { state in
            guard !state.closed else { throw TokenStoreError(.storeClosed, "The store was closed.") }
            let after: Int64
            if running.withLock({ $0 != nil }) {
                after = max(try connection.read { db, _ in try ChangeLog.exists(db) ? try ChangeLog.newest(db) : 0 }, state.delivered)
            } else {
                // Watching starts before the starting point is read: nothing between them is missed.
                let watcher = try ChangeWatcher(databasePath: connection.path, logger: connection.logger)
                let start = try connection.read { db, envelope in
                    try ChangeWatcher.Position(
                        seq: ChangeLog.exists(db) ? ChangeLog.newest(db) : 0, dataVersion: db.dataVersion(),
                        snapshot: ChangeLog.Snapshot.take(db, envelope: envelope))
                }
                guard watcher.start(hub: self, connection: connection, from: start) else {
                    throw TokenStoreError(.ioError, "No thread could be started to watch the store for changes.")
                }
                running.withLock { $0 = watcher }
                state.delivered = start.seq
                after = start.seq
            }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(after: after, delivery: delivery)
            return id
        }
    }

    /// Ends subscription `id` (nothing is delivered to it once this returns, unless it is
    /// called from inside its own handler); the watcher stops with the last one.
    func unsubscribe(_ id: UInt64) {
        let removed: ChangeDelivery? = state.withLock { state in
            guard let subscriber = state.subscribers.removeValue(forKey: id) else { return nil }
            if state.subscribers.isEmpty { stopWatcher() }
            return subscriber.delivery
        }
        removed?.cancel()
    }

    /// The store closed: every subscription ends (its sequence finishes), the watcher stops.
    func close() {
        let ended: [ChangeDelivery] = state.withLock { state in
            state.closed = true
            stopWatcher()
            defer { state.subscribers.removeAll() }
            return state.subscribers.values.map(\.delivery)
        }
        for delivery in ended { delivery.finish(throwing: nil) }
    }

    /// After a commit that logged changes, with the connection's lock held: other processes'
    /// watchers are woken through the -wal's modification time (an inotify event that comes
    /// after the commit is complete), this object's watcher directly.
    func committed(databasePath: String) {
        // Without the touch (no -wal: a rollback-journal store), other processes' watchers
        // still see the commit at their follow-up check after the file's writes.
        _ = tokenstore_touch_now(databasePath + "-wal")
        running.withLock { $0?.wake() }
    }

    /// With the connection's lock held: this object became locked or unlocked. Queued for the
    /// watcher (so that it reaches subscribers in order with the other changes, on the watcher
    /// thread), which is woken; nothing is kept while none runs.
    func lockChanged(locked: Bool) {
        running.withLock { watcher in
            guard let watcher else { return }
            lockChanges.withLock { $0.append(locked ? .storeLocked : .storeUnlocked) }
            watcher.wake()
        }
    }

    /// From the watcher: the lock transitions queued since it last took them.
    func takeLockChanges() -> [StoreChange] {
        lockChanges.withLock { changes in
            defer { changes.removeAll() }
            return changes
        }
    }

    /// From the watcher: lock transitions, to every subscriber.
    func deliverLockChanges(_ changes: [StoreChange]) {
        guard !changes.isEmpty else { return }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for change in changes {
            for subscriber in subscribers { subscriber.delivery.send(change) }
        }
    }

    /// From the watcher: `changes` (in order, with their sequence numbers) go to every
    /// subscriber that started before each; `newest` is the sequence number reached.
    func deliver(_ changes: [(seq: Int64, change: StoreChange)], newest: Int64) {
        let subscribers = state.withLock { state in
            state.delivered = max(state.delivered, newest)
            return Array(state.subscribers.values)
        }
        for (seq, change) in changes {
            for subscriber in subscribers where seq > subscriber.after { subscriber.delivery.send(change) }
        }
    }

    /// From the watcher, when it cannot go on (the store was closed under it): every
    /// subscription ends, with `error` for those that can carry one.
    func watcherEnded(_ watcher: ChangeWatcher, error: (any Error)?) {
        let ended: [ChangeDelivery] = state.withLock { state in
            guard running.withLock({ $0 === watcher }) else { return [] }
            stopWatcher()
            defer { state.subscribers.removeAll() }
            return state.subscribers.values.map(\.delivery)
        }
        for delivery in ended { delivery.finish(throwing: error) }
    }

    /// With `state` held.
    private func stopWatcher() {
        running.withLock { watcher in
            watcher?.stop()
            watcher = nil
            lockChanges.withLock { $0.removeAll() }
        }
    }
}

/// How one subscriber receives changes: a handler called on the watcher thread, in order, and
/// what to do when the subscription ends.
final class ChangeDelivery: Sendable {
    private let handler: @Sendable (StoreChange) -> Void
    private let onFinish: @Sendable ((any Error)?) -> Void
    /// Held while the handler runs, so that ``cancel()`` can wait for a delivery in progress.
    private let gate = Locked(())
    private let status = Locked<(active: Bool, deliveringThread: pthread_t?)>((true, nil))

    init(handler: @escaping @Sendable (StoreChange) -> Void, onFinish: @escaping @Sendable ((any Error)?) -> Void = { _ in }) {
        self.handler = handler
        self.onFinish = onFinish
    }

    func send(_ change: StoreChange) {
        gate.withLock { _ in
            let active = status.withLock { status in
                if status.active { status.deliveringThread = pthread_self() }
                return status.active
            }
            guard active else { return }
            handler(change)
            status.withLock { $0.deliveringThread = nil }
        }
    }

    /// Ends the subscription from the store's side (closed): `onFinish` runs once.
    func finish(throwing error: (any Error)?) {
        guard deactivate() else { return }
        onFinish(error)
    }

    /// Ends the subscription from the subscriber's side; once it returns, the handler is not
    /// running and never runs again (from inside the handler itself it returns at once).
    func cancel() {
        let insideHandler = status.withLock { status in
            status.active = false
            return status.deliveringThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        }
        if !insideHandler { gate.withLock { _ in } }
    }

    private func deactivate() -> Bool {
        status.withLock { status in
            defer { status.active = false }
            return status.active
        }
    }
}
