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
    /// A change waiting for the watcher to deliver it: a logged one with its sequence number, or
    /// this object's lock transition (nil: it goes to every subscriber).
    typealias Queued = (seq: Int64?, change: StoreChange)

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
    /// What the watcher has not delivered yet, in order: this object's lock transitions, and the
    /// changes read just before a lock (taken while `running` is held, alone).
    private let queued = Locked<[Queued]>([])

    /// Adds a subscriber from the store's state now on, starting the watcher if none runs.
    /// - Returns: the subscription's id, for ``unsubscribe(_:)``.
    /// - Throws: `storeClosed`, the errors of a read of the store (its starting point), and
    ///   `ioError` when the file's folder cannot be watched.
    func subscribe(_ connection: StoreConnection, _ delivery: ChangeDelivery) throws -> UInt64 {
        try state.withLock { state in
            guard !state.closed else { throw TokenStoreError(.storeClosed, "The store was closed.") }
            let after: Int64
            if running.withLock({ $0 != nil }) {
                after = max(try connection.withDatabase { db in try Self.newestLogged(db) }, state.delivered)
            } else {
                // Watching starts before the starting point is read: nothing between them is missed
                // (a lock transition the read itself makes is queued for the new watcher).
                let watcher = try ChangeWatcher(databasePath: connection.path, logger: connection.logger)
                running.withLock { $0 = watcher }
                do {
                    let start = try Self.startingPoint(connection)
                    guard watcher.start(hub: self, connection: connection, from: start) else {
                        throw TokenStoreError(.ioError, "No thread could be started to watch the store for changes.")
                    }
                    state.delivered = start.seq
                    after = start.seq
                } catch {
                    stopWatcher()
                    throw error
                }
            }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(after: after, delivery: delivery)
            return id
        }
    }

    /// Where a new watcher starts. A locked store's log cannot be opened, but its newest sequence
    /// number and `PRAGMA data_version` are not sealed: the snapshot waits for the unlock.
    private static func startingPoint(_ connection: StoreConnection) throws -> ChangeWatcher.Position {
        do {
            return try connection.read { db, envelope in
                try ChangeWatcher.Position(
                    seq: newestLogged(db), dataVersion: db.dataVersion(), snapshot: ChangeLog.Snapshot.take(db, envelope: envelope))
            }
        } catch let error as TokenStoreError where error.code == .storeLocked {
            return try connection.withDatabase { db in
                try db.readTransaction { try ChangeWatcher.Position(seq: newestLogged(db), dataVersion: db.dataVersion(), snapshot: nil) }
            }
        }
    }

    /// The log's newest sequence number (0 without a log); nothing sealed is read.
    private static func newestLogged(_ db: Database) throws -> Int64 {
        try ChangeLog.exists(db) ? ChangeLog.newest(db) : 0
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

    /// With the connection's lock held and its key in hand (`envelope`), just before the key is
    /// wiped: the running watcher reads the changes committed until now, so that they reach
    /// subscribers before the `storeLocked` that follows (``ChangeWatcher/readBeforeLock(_:envelope:hub:)``).
    func willLock(_ db: Database, envelope: Envelope) {
        running.withLock { $0 }?.readBeforeLock(db, envelope: envelope, hub: self)
    }

    /// With the connection's lock held: this object became locked or unlocked. Queued for the
    /// watcher (so that it reaches subscribers in order with the other changes, on the watcher
    /// thread), which is woken; nothing is kept while none runs.
    func lockChanged(locked: Bool) {
        running.withLock { watcher in
            guard let watcher else { return }
            queued.withLock { $0.append((nil, locked ? .storeLocked : .storeUnlocked)) }
            watcher.wake()
        }
    }

    /// With the connection's lock held, from ``willLock(_:envelope:)``: changes read for the watcher.
    func queue(_ changes: [Queued]) {
        guard !changes.isEmpty else { return }
        running.withLock { watcher in
            guard watcher != nil else { return }
            queued.withLock { $0 += changes }
        }
    }

    /// From the watcher: what was queued since it last took it.
    func takeQueued() -> [Queued] {
        queued.withLock { changes in
            defer { changes.removeAll() }
            return changes
        }
    }

    /// From the watcher: `changes`, in order. A lock transition goes to every subscriber, a
    /// logged change to every subscriber that started before its sequence number; `newest` is
    /// the sequence number the watcher's reads reached.
    func deliver(_ changes: [Queued], newest: Int64) {
        guard !changes.isEmpty else { return }
        let subscribers = state.withLock { state in
            state.delivered = max(state.delivered, newest)
            return Array(state.subscribers.values)
        }
        for (seq, change) in changes {
            for subscriber in subscribers where seq.map({ $0 > subscriber.after }) ?? true { subscriber.delivery.send(change) }
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
            queued.withLock { $0.removeAll() }
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
