import Foundation
import TestTraits
import Testing
import TestSupport

private let swtpmTrait = Testing.ConditionTrait.enabled(
    if: SoftwareTPM.isInstalled, Comment(rawValue: "needs swtpm (scripts/install-deps)"))

/// The TPM + PIN key slot through the binary: `slot add tpm-pin --pin-fd N`, then `--pin-fd N`
/// opens the store alone (its keyring item deleted), on a real software TPM (swtpm's own lockout
/// parameters: 3 failures, 1000 s each) with the real keyring. The PIN only ever travels on a
/// descriptor (a file opened by the shell as descriptor 3), never in argv or the environment.
@Suite("tokenctl: TPM + PIN key slot", tokenctlKeyringTrait, swtpmTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMPINCommandTests {
    private static let pin = "73914"

    /// `tokenctl --store PATH <arguments>` through sh with `fd3` open as descriptor 3.
    private func run(_ store: TokenctlStore, _ arguments: String, fd3: URL? = nil, tcti: String) throws -> PrivateKeyring.ProcessResult {
        var environment = TokenctlStore.keyringEnvironment
        environment["PATH"] = "/usr/bin:/bin"
        // Under scripts/sanitizers: the suite's sanitizer options (leak detection off, as for the
        // whole suite), else LeakSanitizer turns a wrong-PIN exit (77) into 1. What it reports
        // there (libcrypto objects of tpm2-tss's session after a refused TPM2_Unseal) is open.
        for name in ["ASAN_OPTIONS", "TSAN_OPTIONS"] { environment[name] = ProcessInfo.processInfo.environment[name] }
        environment["TOKENSTORE_TPM_TCTI"] = tcti
        let redirection = fd3.map { " 3<\"\($0.path)\"" } ?? ""
        let argv = ["-c", "exec \"$0\" --store \"$1\" \(arguments)\(redirection)", TokenctlBinary.url.path, store.path]
        #expect(!argv.joined().contains(Self.pin) && !environment.values.joined().contains(Self.pin), "the PIN is in argv or the environment")
        return try PrivateKeyring.run("/bin/sh", argv, environment: environment, timeout: .seconds(120))
    }

    private func write(_ store: TokenctlStore, _ name: String, _ text: String) throws -> URL {
        let url = store.directory.appending(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// `--json status`'s `tpmLockout` (no PIN given).
    private func lockout(_ store: TokenctlStore, tcti: String) throws -> [String: Any] {
        let status = try run(store, "--json status", tcti: tcti)
        let document = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any]
        return try #require(document?["tpmLockout"] as? [String: Any], "no tpmLockout in \(status.standardOutput)")
    }

    @Test("slot add tpm-pin --pin-fd 3; --pin-fd 3 alone opens every row; wrong PINs → 77 wrongPIN with the tries left, then 75 tpmLockedOut even for the right PIN, no reset advice")
    func addOpenAndLockOut() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let store = try TokenctlStore()
        let canaries = (0..<3).map { _ in makeCanary() }
        for (n, canary) in canaries.enumerated() { try store.put(canary, account: "user\(n)") }
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let pinFile = try write(store, "pin", Self.pin + "\n")
        let wrongFile = try write(store, "wrong", "00000\n")

        let missing = try run(store, "slot add tpm-pin", tcti: tpm.tcti)
        #expect(missing.status == 64 && missing.standardError.contains("--pin-fd"), "\(missing)")
        let added = try run(store, "slot add tpm-pin --pin-fd 3", fd3: pinFile, tcti: tpm.tcti)
        #expect(added.status == 0 && added.standardOutput.contains("tpm-pin"), "\(added)")
        let fresh = try lockout(store, tcti: tpm.tcti)
        #expect(fresh["readable"] as? Bool == true && fresh["failures"] as? Int == 0 && fresh["maxTries"] as? Int == 3, "\(fresh)")
        #expect(fresh["intervalSeconds"] as? Int == 1000 && fresh["lockedOut"] as? Bool == false, "\(fresh)")
        let text = try run(store, "status", tcti: tpm.tcti)
        #expect(text.standardOutput.contains("0 of 3 failures counted (3 wrong PINs left)"), "\(text.standardOutput)")
        let listed = try run(store, "--json slot list", tcti: tpm.tcti)
        #expect(listed.standardOutput.contains("\"keyring\"") && listed.standardOutput.contains("\"tpm-pin\""), "\(listed)")

        try PrivateKeyring.clearItems(storeID: storeID)  // only the PIN slot is left to open it
        let lost = try run(store, "get --account user0 --kind generic", tcti: tpm.tcti)
        #expect(lost.status == 65 && lost.standardError.contains("[dataKeyMissing]"), "\(lost)")
        #expect(lost.standardError.contains("--pin-fd N") && lost.standardError.contains("do not reset"), "\(lost.standardError)")
        for (n, canary) in canaries.enumerated() {
            let get = try run(store, "--pin-fd 3 get --account user\(n) --kind generic --reveal", fd3: pinFile, tcti: tpm.tcti)
            #expect(get.status == 0 && get.standardOutput.contains(canary), "\(get)")
        }
        for left in [2, 1, 0] {
            let wrong = try run(store, "--pin-fd 3 get --account user0 --kind generic", fd3: wrongFile, tcti: tpm.tcti)
            #expect(wrong.status == 77 && wrong.standardError.contains("[wrongPIN]"), "\(wrong)")
            #expect(wrong.standardError.contains(left > 0 ? "allows \(left) more wrong PIN" : "now in dictionary-attack lockout"), "\(wrong.standardError)")
            let counted = try lockout(store, tcti: tpm.tcti)
            #expect(counted["failures"] as? Int == 3 - left && counted["triesLeft"] as? Int == left, "\(counted)")
        }
        let lockedOut = try lockout(store, tcti: tpm.tcti)
        #expect(lockedOut["lockedOut"] as? Bool == true && (lockedOut["recoverySeconds"] as? Int).map { $0 > 0 && $0 <= 1000 } == true, "\(lockedOut)")
        let locked = try run(store, "--pin-fd 3 get --account user0 --kind generic --reveal", fd3: pinFile, tcti: tpm.tcti)
        #expect(locked.status == 75 && locked.standardError.contains("[tpmLockedOut]"), "\(locked)")
        #expect(locked.standardError.contains("within 1000 s") && !locked.standardError.contains("reset"), "\(locked.standardError)")
        #expect(!locked.standardOutput.contains(canaries[0]))
        for result in [added, listed, locked] { #expect(!result.standardOutput.contains(Self.pin) && !result.standardError.contains(Self.pin)) }
    }
}
