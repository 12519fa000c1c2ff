import Foundation
import TokenStore

/// `tokenbench lock ITERATIONS DIR`: what the explicit lock costs, on a store of 100 items with the
/// Secret Service key provider (inside scripts/with-keyring):
/// - `lock_p50_us`: `lock()` until it returns, the data key dropped (its guarded memory wiped);
/// - `seen_p50_us`: another store object's next read after `lock(allProcesses: true)`, until it
///   throws `storeLocked` with its key dropped (the record read through `PRAGMA data_version`);
/// - `unlock_read_p50_us`: `unlock()` (the key fetched again from the provider) and the first read;
/// - `cold_open_read_p50_us`: a new store object's open and first read, for comparison (goal:
///   unlock + first read ≤ 1.2 × that).
/// Prints `METRIC bench_lock lock_p50_us=… seen_p50_us=… unlock_read_p50_us=… cold_open_read_p50_us=… ratio=… iterations=…`.
enum LockBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 3, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("lock ITERATIONS DIR")
        }
        let path = arguments[2] + "/lock-bench/tokens.sqlite"
        let appID = "dev.tokenstore.bench"
        let key = ItemKey(account: AccountID("user-0@example.com", service: Workload.service), kind: .generic)
        let store = try TokenStore(path: path, appID: appID)
        for index in 0..<100 {
            try store.set(
                SecretBytes(Workload.token(index)),
                for: ItemKey(account: AccountID(Workload.account(index), service: Workload.service), kind: .generic))
        }
        let other = try TokenStore(path: path, appID: appID)
        _ = try other.secret(for: key)
        var lock: [UInt64] = [], seen: [UInt64] = [], unlockRead: [UInt64] = [], coldOpen: [UInt64] = []
        for _ in 0..<iterations {
            var start = monotonicNanos()
            try store.lock()
            lock.append(monotonicNanos() - start)
            start = monotonicNanos()
            try store.unlock()
            _ = try store.secret(for: key)
            unlockRead.append(monotonicNanos() - start)

            try store.lock(allProcesses: true)
            start = monotonicNanos()
            do {
                _ = try other.secret(for: key)
                throw TokenStoreError(.ioError, "the other store object read a store locked for every process")
            } catch TokenStoreError.storeLocked {
                seen.append(monotonicNanos() - start)
            }
            try store.unlock(allProcesses: true)
            _ = try other.secret(for: key)

            start = monotonicNanos()
            let cold = try TokenStore(path: path, appID: appID)
            _ = try cold.secret(for: key)
            coldOpen.append(monotonicNanos() - start)
            cold.close()
        }
        func p50(_ samples: [UInt64]) -> Double { Double(samples.sorted()[samples.count / 2]) / 1e3 }
        func text(_ value: Double) -> String { String(format: "%.1f", value) }
        print(
            "METRIC bench_lock lock_p50_us=\(text(p50(lock))) seen_p50_us=\(text(p50(seen))) "
                + "unlock_read_p50_us=\(text(p50(unlockRead))) cold_open_read_p50_us=\(text(p50(coldOpen))) "
                + "ratio=\(String(format: "%.2f", p50(unlockRead) / p50(coldOpen))) goal_ratio=1.2 iterations=\(iterations)")
    }
}
