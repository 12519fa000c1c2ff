/// Runs operations one at a time per key (an account), in arrival order, while operations
/// on different keys run at once.
actor KeyedSerializer {
    private var tails: [String: Task<Void, Never>] = [:]

    func run<T: Sendable>(_ key: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
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

    private func forget(_ key: String, tail: Task<Void, Never>) async {
        await tail.value
        if tails[key] == tail { tails[key] = nil }
    }
}

/// The in-memory key of an account (never logged, never stored).
func accountKey(service: String, account: String) -> String {
    "\(service.utf8.count):\(service)\u{0}\(account)"
}
