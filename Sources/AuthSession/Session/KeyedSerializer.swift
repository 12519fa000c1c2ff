import TokenStore

/// Runs operations one at a time per account, in arrival order, while operations on
/// different accounts run at once.
///
/// A cancellation of a caller's task reaches its operation (which ends as it does when
/// cancelled: a logout records its revocation as pending); a caller cancelled while its turn
/// has not come leaves the queue at once with ``AuthSessionError/Code/cancelled``, and the
/// operations after it still wait for the ones before it.
actor KeyedSerializer {
    private var tails: [AccountID: Task<Void, Never>] = [:]

    func run<T: Sendable>(_ key: AccountID, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tails[key]
        let task = Task<T, any Error> {
            if let previous {
                _ = try await CancellableWait.value("Waiting for the account's previous operation") { () -> Result<Void, any Error> in
                    await previous.value
                    return .success(())
                }
            }
            return try await operation()
        }
        // The next operation waits for this one and for the ones before it, even when this one
        // left the queue early.
        let tail = Task<Void, Never> {
            await previous?.value
            _ = await task.result
        }
        tails[key] = tail
        defer { Task { await self.forget(key, tail: tail) } }
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }

    private func forget(_ key: AccountID, tail: Task<Void, Never>) async {
        await tail.value
        if tails[key] == tail { tails[key] = nil }
    }
}
