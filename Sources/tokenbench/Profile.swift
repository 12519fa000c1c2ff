import Foundation
import TokenStore

/// `tokenbench profile OP SIZE ITERATIONS DIR`: a store of SIZE items in DIR (made once, kept),
/// then ITERATIONS of OP (get, put, list, open) inside `profileLoop`, so that
/// `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*profileLoop*'` counts
/// the instructions of the operation alone. Prints the mean time per operation.
enum Profile {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 5, let size = Int(arguments[2]), let iterations = Int(arguments[3]) else {
            usageError("profile OP SIZE ITERATIONS DIR")
        }
        let operation = arguments[1]
        if operation == "plaintext-get" { return try plaintextGet(size: size, iterations: iterations, directory: arguments[4]) }
        let path = arguments[4] + "/profile-\(size).sqlite"
        let appID = "dev.tokenstore.bench.profile"
        var store: TokenStore? = try TokenStore(path: path, appID: appID)
        let keys = (0..<size).map { ItemKey(account: AccountID(Workload.account($0), service: Workload.service), kind: .generic) }
        if try store!.counts().items < size {
            for index in 0..<size { try store!.set(SecretBytes(Workload.token(index)), for: keys[index]) }
        }
        if operation == "open" {
            store?.close()
            store = nil
        }
        let start = monotonicNanos()
        let checksum = try profileLoop(operation, store: store, path: path, appID: appID, keys: keys, iterations: iterations)
        let elapsed = monotonicNanos() - start
        print("op=\(operation) size=\(size) iterations=\(iterations) mean_ns=\(elapsed / UInt64(max(1, iterations))) checksum=\(checksum)")
    }

    /// `profile plaintext-get`: the same loop over plaintext SQLite (the baseline `get` is
    /// compared with), so that both counts come from one kind of run.
    static func plaintextGet(size: Int, iterations: Int, directory: String) throws {
        let store = try PlaintextStore(path: directory + "/plaintext-\(size).sqlite")
        if try store.list() < size { try store.populate(0..<size) }
        let start = monotonicNanos()
        let checksum = try plaintextLoop(store, size: size, iterations: iterations)
        let elapsed = monotonicNanos() - start
        print("op=plaintext-get size=\(size) iterations=\(iterations) mean_ns=\(elapsed / UInt64(max(1, iterations))) checksum=\(checksum)")
    }

    @inline(never)
    static func plaintextLoop(_ store: PlaintextStore, size: Int, iterations: Int) throws -> Int {
        var rng = SplitMix64(seed: 7)
        var checksum = 0
        for _ in 0..<iterations {
            checksum &+= try store.get(lookup: PlaintextStore.lookup(Int.random(in: 0..<size, using: &rng)))?.count ?? 0
        }
        return checksum
    }

    @inline(never)
    static func profileLoop(
        _ operation: String, store: TokenStore?, path: String, appID: String, keys: [ItemKey], iterations: Int
    ) throws -> Int {
        var rng = SplitMix64(seed: 7)
        var checksum = 0
        let value = SecretBytes(Workload.token(1, generation: 9))
        for _ in 0..<iterations {
            let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
            switch operation {
            case "get": checksum &+= try store!.secret(for: key)?.count ?? 0
            case "put": try store!.set(value, for: key)
            case "list": try store!.forEachItem { checksum &+= $0.byteCount }
            case "open":
                let opened = try TokenStore(path: path, appID: appID)
                checksum &+= try opened.secret(for: key)?.count ?? 0
                opened.close()
            default: usageError("profile: unknown operation \(operation)")
            }
        }
        return checksum
    }
}
