import Foundation
import TokenStore

/// `tokenbench slot-open ITERATIONS DIR`: what key slots add to an open, with the Secret Service
/// key provider (inside scripts/with-keyring). Each iteration opens each store (a new TokenStore
/// object: slot rows read, key loaded and checked, the slot rows' MACs checked), reads one item
/// and closes it, in turn:
/// - `plain`: a store without slot rows (today's open);
/// - `first_slot`: a store with three more slots (a second keyring slot, a passphrase, a
///   recovery key), opened through its first (the keyring item that keeps the data key);
/// - `boxed_slot`: a store whose only slot is a keyring slot with a box (the key pair's secret
///   half in the keyring, the data key sealed to its public half: one X25519 open more).
/// Goal: opening with the first usable slot ≤ 1.1 × the plain open.
/// Prints `METRIC bench_slot_open plain_p50_ms=… first_slot_p50_ms=… first_slot_ratio=… boxed_slot_p50_ms=… boxed_slot_ratio=… iterations=…`.
enum SlotBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 3, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("slot-open ITERATIONS DIR")
        }
        let appID = "dev.tokenstore.bench.slots"
        let key = ItemKey(account: AccountID(Workload.account(0), service: Workload.service), kind: .generic)
        let base = arguments[2] + "/slot-bench"
        let paths = ["plain": base + "/plain/tokens.sqlite", "first_slot": base + "/first/tokens.sqlite", "boxed_slot": base + "/boxed/tokens.sqlite"]
        for (_, path) in paths {
            let store = try TokenStore(path: path, appID: appID)
            try store.set(SecretBytes(Workload.token(0)), for: key)
            store.close()
        }
        let first = try TokenStore(path: paths["first_slot"]!, appID: appID)
        try first.addKeySlot(SecretServiceKeyProvider())
        try first.addKeySlot(
            PassphraseKeyProvider(
                storePath: paths["first_slot"]!, passphrase: SecretBytes(Array("bench passphrase".utf8)), limits: .interactive,
                keyDirectory: base + "/first/keys"))
        _ = try first.addRecoveryKeySlot(limits: .interactive)
        first.close()
        let boxed = try TokenStore(path: paths["boxed_slot"]!, appID: appID)
        try boxed.addKeySlot(SecretServiceKeyProvider())
        try boxed.removeKeySlot(1)
        boxed.close()

        let order = ["plain", "first_slot", "boxed_slot"]
        var samples: [String: [UInt64]] = [:]
        for _ in 0..<iterations {
            for name in order {
                let start = monotonicNanos()
                let opened = try TokenStore(path: paths[name]!, appID: appID)
                guard try opened.secret(for: key)?.count == Workload.tokenBytes else { fail("slot-open: the item is missing") }
                opened.close()
                samples[name, default: []].append(monotonicNanos() - start)
            }
        }
        for name in order { try TokenStore(path: paths[name]!, appID: appID).destroyStore(confirm: .yesDestroyEverything) }
        func p50(_ name: String) -> Double {
            let values = (samples[name] ?? [0]).sorted()
            return Double(values[values.count / 2]) / 1e6
        }
        func text(_ value: Double) -> String { String(format: "%.2f", value) }
        let plain = p50("plain")
        print(
            "METRIC bench_slot_open plain_p50_ms=\(text(plain)) first_slot_p50_ms=\(text(p50("first_slot"))) "
                + "first_slot_ratio=\(text(p50("first_slot") / max(plain, 0.001))) boxed_slot_p50_ms=\(text(p50("boxed_slot"))) "
                + "boxed_slot_ratio=\(text(p50("boxed_slot") / max(plain, 0.001))) iterations=\(iterations)")
    }
}
