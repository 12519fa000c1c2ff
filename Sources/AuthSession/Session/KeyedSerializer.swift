import TokenStore

/// Runs operations one at a time per account, in arrival order, while operations on
/// different accounts run at once.
actor KeyedSerializer {
    private var tails: [AccountID: Task<Void, Never>] = [:]

    func run<T: Sendable>(_ key: AccountID, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tails[key]
        let task = Task<T, any Error> {
            await previous?.value
            return try await operation()
        }
        let tail = Task<Void, Never> { _ = await task.result }
        tails[key] = tail
        defer { Task { await self.forget(key, tail: tail) } }
        return try await task.value
    }

    private func forget(_ key: AccountID, tail: Task<Void, Never>) async {
        await tail.value
        if tails[key] == tail { tails[key] = nil }
    }
}
