import FoundationEssentials

extension TokenStore {
    /// Runs `body` with this store on ``BlockingExecutor/shared`` and suspends the caller until
    /// it returns. A body that has started runs to its end, whatever happens to the task, except
    /// a user-presence check waiting on polkit: the task's cancellation (or `presence`'s, when
    /// given) cancels it at polkit and the read throws `cancelled` (``PresenceCancellation``).
    package func onBlockingExecutor<R: Sendable>(
        presence: PresenceCancellation? = nil, _ body: @escaping @Sendable (TokenStore) throws -> R
    ) async throws -> R {
        try await PresenceCancellation.onBlockingExecutor(presence) { try body(self) }
    }
}
