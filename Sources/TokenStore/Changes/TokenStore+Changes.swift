import FoundationEssentials

extension TokenStore {
    /// The changes made to this store from now on, by this process or any other that opens
    /// the same file: accounts signed in and out, credential states, renewals, key switches.
    ///
    /// ```swift
    /// for try await change in store.changes {
    ///     if case .accountRemoved(let account) = change { showSignedOut(account) }
    /// }
    /// ```
    ///
    /// Each read of the property starts a subscription at that moment (events before it are
    /// not delivered); iterate it once. Changes arrive in commit order, typically within a few
    /// milliseconds of the commit (p95 well under 500 ms). What one wake-up finds is coalesced:
    /// a second renewal of the same account, or a second key switch, is left out. A watcher that
    /// missed logged changes (more than 512 since it last looked, or a reset) reports the
    /// difference between the store it knew and the store now instead — renewals then leave no
    /// trace. The sequence ends when the store is closed, and its subscription when the
    /// iteration ends (the task cancelled, or the sequence and its iterator released).
    ///
    /// No daemon and no polling: one thread per store object, while anyone subscribes, sleeps
    /// on inotify (the store's folder) and wakes when the file is written; it uses no CPU while
    /// nothing changes. What an event carries, and what it never does, is in ``StoreChange``.
    /// - Throws (from the iteration): `storeClosed` (closed before the subscription began),
    ///   the errors of a store read (its starting point), `ioError` (the folder cannot be watched).
    public var changes: StoreChanges { StoreChanges(connection: connection) }

    /// Calls `handler` with each change made to this store from now on, by this process or any
    /// other (the callback form of ``changes``, with the same delivery and coalescing).
    ///
    /// `handler` runs on the store's watcher thread, one change at a time, in commit order; it
    /// may call the store (not from inside another callback of it). Keep the returned
    /// observation: releasing it, or ``StoreChangeObservation/cancel()``, ends the
    /// subscription. Closing the store ends it too.
    /// - Throws: `storeClosed`, the errors of a store read (its starting point), `ioError` (the
    ///   store's folder cannot be watched).
    public func observeChanges(_ handler: @escaping @Sendable (StoreChange) -> Void) throws -> StoreChangeObservation {
        let hub = connection.changeHub
        let id = try hub.subscribe(connection, ChangeDelivery(handler: handler))
        return StoreChangeObservation(hub: hub, id: id)
    }
}

/// A subscription of ``TokenStore/observeChanges(_:)``: ends with ``cancel()`` or when released.
public final class StoreChangeObservation: Sendable {
    private let hub: ChangeHub
    private let id: UInt64

    init(hub: ChangeHub, id: UInt64) {
        self.hub = hub
        self.id = id
    }

    /// Ends the subscription. Once it returns, the handler is not running and is never called
    /// again, except when called from inside the handler (the current call then finishes).
    /// Calling it again does nothing.
    public func cancel() {
        hub.unsubscribe(id)
    }

    deinit {
        hub.unsubscribe(id)
    }
}

/// The changes of a store from the moment ``TokenStore/changes`` was read (an `AsyncSequence`
/// of ``StoreChange``; iterate it once).
public struct StoreChanges: AsyncSequence, Sendable {
    public typealias Element = StoreChange

    private let stream: AsyncThrowingStream<StoreChange, any Error>
    private let subscription: Subscription

    init(connection: StoreConnection) {
        let (stream, continuation) = AsyncThrowingStream<StoreChange, any Error>.makeStream()
        let delivery = ChangeDelivery(
            handler: { continuation.yield($0) }, onFinish: { error in continuation.finish(throwing: error) })
        let hub = connection.changeHub
        let subscription: Subscription
        do {
            subscription = Subscription(hub: hub, id: try hub.subscribe(connection, delivery))
        } catch {
            subscription = Subscription(hub: hub, id: nil)
            continuation.finish(throwing: error)
        }
        continuation.onTermination = { [weak subscription] _ in subscription?.end() }
        self.stream = stream
        self.subscription = subscription
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), subscription: subscription)
    }

    /// The iterator; it keeps the subscription while it lives.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<StoreChange, any Error>.Iterator
        let subscription: Subscription

        public mutating func next() async throws -> StoreChange? {
            try await base.next()
        }
    }

    /// One subscription, ended when the iteration ends or the last holder releases it.
    final class Subscription: Sendable {
        private let hub: ChangeHub
        private let id: Locked<UInt64?>

        init(hub: ChangeHub, id: UInt64?) {
            self.hub = hub
            self.id = Locked(id)
        }

        func end() {
            guard let id = id.withLock({ id in defer { id = nil }; return id }) else { return }
            hub.unsubscribe(id)
        }

        deinit { end() }
    }
}
