import Foundation
import TokenStore

/// `tokenbench tpm-open ITERATIONS DIR`: the open of a store with the TPM tier against the keyring
/// tier in the same run: each iteration opens a store (a new TokenStore object: key
/// load, unseal for the TPM tier, epoch check), reads one item and closes it, alternating the two
/// tiers. The TPM is `$TOKENSTORE_TPM_TCTI` (scripts/with-swtpm sets it); run inside scripts/with-keyring.
/// The TPM store also gets a TPM + PIN slot, opened with its PIN as a third tier (`pin_ratio`: a
/// PIN open against a plain TPM open).
/// Prints the p50s, their ratio and the TPM commands one open sends:
/// `METRIC bench_tpm_open keyring_p50_ms=… tpm_p50_ms=… ratio=… … pin_p50_ms=… pin_ratio=… iterations=…`.
enum TPMBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 3, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("tpm-open ITERATIONS DIR")
        }
        let appID = "dev.tokenstore.bench.tpm"
        let key = ItemKey(account: AccountID(Workload.account(0), service: Workload.service), kind: .generic)
        let tpm = TPMKeyProvider()
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
        var samples: [String: [UInt64]] = ["keyring": [], "tpm": [], "pin": []]
        var tpmCommands = 0
        for _ in 0..<iterations {
            for store in stores {
                let commandsBefore = TPMKeyProvider.commandCount
                let start = monotonicNanos()
                let opened = try TokenStore(path: store.path, appID: appID, keyProvider: store.provider)
                guard try opened.secret(for: key)?.count == Workload.tokenBytes else { fail("tpm-open: the item is missing") }
                opened.close()
                samples[store.name, default: []].append(monotonicNanos() - start)
                if store.name == "tpm" { tpmCommands += TPMKeyProvider.commandCount - commandsBefore }
            }
        }
        // The TPM's share: a probe is TPM2_Startup, TPM2_CreatePrimary and a flush on a new connection.
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
        let keyring = p50(samples["keyring"] ?? [0])
        let sealed = p50(samples["tpm"] ?? [0])
        let pinned = p50(samples["pin"] ?? [0])
        print(
            "METRIC bench_tpm_open keyring_p50_ms=\(String(format: "%.2f", keyring)) tpm_p50_ms=\(String(format: "%.2f", sealed)) "
                + "ratio=\(String(format: "%.2f", sealed / max(keyring, 0.001))) "
                + "tpm_probe_p50_ms=\(String(format: "%.2f", p50(probes))) "
                + "tpm_commands_per_open=\(tpmCommands / iterations) pin_p50_ms=\(String(format: "%.2f", pinned)) "
                + "pin_ratio=\(String(format: "%.2f", pinned / max(sealed, 0.001))) iterations=\(iterations) tcti=\(tpm.tcti)")
    }
}
