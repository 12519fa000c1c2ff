import Foundation
import TestSupport
import TokenStore

/// `tokenbench tpm-open ITERATIONS DIR`: the open of a store with the TPM tier against the keyring
/// tier in the same run: each iteration opens a store (a new TokenStore object: key
/// load, unseal for the TPM tier, epoch check), reads one item and closes it, alternating the two
/// tiers. The TPM is `$TOKENSTORE_TPM_TCTI` (scripts/with-swtpm sets it); run inside scripts/with-keyring.
/// The TPM store also gets a TPM + PIN slot, opened with its PIN as a third tier (`pin_ratio`: a
/// PIN open against a plain TPM open).
/// Then a second pass with the persistent storage root key at 0x81000001 that systemd provisions
/// (made here with tpm2-tools, TestSupport's PersistentSRK, and evicted at the end; a TPM that
/// already holds a key there is refused: the bench never evicts what it did not make): the same
/// stores (sealed before the SRK existed) opened through it, `srk_` figures, keyring alternating too.
/// Prints the p50s, their ratio and the TPM commands one open sends:
/// `METRIC bench_tpm_open keyring_p50_ms=… tpm_p50_ms=… ratio=… … pin_p50_ms=… pin_ratio=…
/// srk_tpm_p50_ms=… srk_ratio=… srk_tpm_commands_per_open=… srk_pin_p50_ms=… iterations=…`.
enum TPMBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 3, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("tpm-open ITERATIONS DIR")
        }
        let appID = "dev.tokenstore.bench.tpm"
        let key = ItemKey(account: AccountID(Workload.account(0), service: Workload.service), kind: .generic)
        let tpm = TPMKeyProvider()
        guard try !PersistentSRK.persistentHandles(tcti: tpm.tcti).contains(PersistentSRK.handle) else {
            fail("tpm-open: the TPM holds a key at \(PersistentSRK.handle) already; run it on a fresh swtpm (scripts/with-swtpm)")
        }
        let made: [(name: String, path: String, provider: any KeyProvider)] = [
            ("keyring", arguments[2] + "/tpm-bench-keyring.sqlite", SecretServiceKeyProvider()),
            ("tpm", arguments[2] + "/tpm-bench-tpm.sqlite", tpm),
        ]
        for store in made {
            let opened = try TokenStore(path: store.path, appID: appID, keyProvider: store.provider)
            try opened.set(SecretBytes(Workload.token(0)), for: key)
            opened.close()
        }
        let pin = TPMPINKeyProvider(pin: SecretBytes(Array("20481".utf8)), tcti: tpm.tcti)
        let withSlot = try TokenStore(path: made[1].path, appID: appID, keyProvider: tpm)
        try withSlot.addKeySlot(pin)
        withSlot.close()
        let stores = made + [("pin", made[1].path, pin)]
        var samples: [String: [UInt64]] = [:]
        var commands: [String: Int] = [:]
        func pass(_ prefix: String) throws {
            for _ in 0..<iterations {
                for store in stores {
                    let commandsBefore = TPMKeyProvider.commandCount
                    let start = monotonicNanos()
                    let opened = try TokenStore(path: store.path, appID: appID, keyProvider: store.provider)
                    guard try opened.secret(for: key)?.count == Workload.tokenBytes else { fail("tpm-open: the item is missing") }
                    opened.close()
                    samples[prefix + store.name, default: []].append(monotonicNanos() - start)
                    commands[prefix + store.name, default: 0] += TPMKeyProvider.commandCount - commandsBefore
                }
            }
        }
        try pass("")
        // The same stores through the persistent SRK (as systemd-tpm2-setup leaves it at boot).
        try PersistentSRK.provision(tcti: tpm.tcti)
        try pass("srk_")
        try PersistentSRK.remove(tcti: tpm.tcti)
        // The TPM's share: a probe is TPM2_CreatePrimary and a flush on a new connection (and
        // TPM2_Startup only when the TPM asks).
        var probes: [UInt64] = []
        for _ in 0..<iterations {
            let start = monotonicNanos()
            guard TPMKeyProvider.probe(tcti: tpm.tcti).available else { fail("tpm-open: the TPM did not answer") }
            probes.append(monotonicNanos() - start)
        }
        for store in made {
            let opened = try TokenStore(path: store.path, appID: appID, keyProvider: store.provider)
            try opened.destroyStore(confirm: .yesDestroyEverything)
        }
        func p50(_ values: [UInt64]) -> Double { Double(values.sorted()[values.count / 2]) / 1e6 }
        func ms(_ value: Double) -> String { String(format: "%.2f", value) }
        let keyring = p50(samples["keyring"] ?? [0])
        let sealed = p50(samples["tpm"] ?? [0])
        let pinned = p50(samples["pin"] ?? [0])
        let srkKeyring = p50(samples["srk_keyring"] ?? [0])
        let srkSealed = p50(samples["srk_tpm"] ?? [0])
        let srkPinned = p50(samples["srk_pin"] ?? [0])
        print(
            "METRIC bench_tpm_open keyring_p50_ms=\(ms(keyring)) tpm_p50_ms=\(ms(sealed)) "
                + "ratio=\(ms(sealed / max(keyring, 0.001))) "
                + "tpm_probe_p50_ms=\(ms(p50(probes))) "
                + "tpm_commands_per_open=\((commands["tpm"] ?? 0) / iterations) pin_p50_ms=\(ms(pinned)) "
                + "pin_ratio=\(ms(pinned / max(sealed, 0.001))) "
                + "srk_keyring_p50_ms=\(ms(srkKeyring)) srk_tpm_p50_ms=\(ms(srkSealed)) "
                + "srk_ratio=\(ms(srkSealed / max(srkKeyring, 0.001))) "
                + "srk_tpm_commands_per_open=\((commands["srk_tpm"] ?? 0) / iterations) "
                + "srk_pin_p50_ms=\(ms(srkPinned)) srk_pin_commands_per_open=\((commands["srk_pin"] ?? 0) / iterations) "
                + "iterations=\(iterations) tcti=\(tpm.tcti)")
    }
}
