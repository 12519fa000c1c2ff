import Foundation
import TestTraits
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 6, through the binary: `--key-provider tpm` (and `TOKENCTL_KEY_PROVIDER=tpm`)
/// on a real software TPM (swtpm, a state directory per test), the exit statuses of no usable
/// TPM (69) and of another TPM (65), and the `status` keys `protection` and `tpm`.
private let swtpmTrait = Testing.ConditionTrait.enabled(
    if: SoftwareTPM.isInstalled, Comment(rawValue: "needs swtpm (scripts/install-deps)"))

@Suite("tokenctl: TPM-sealed stores", tokenctlKeyringTrait, swtpmTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMCommandTests {
    static func tpm(_ tcti: String) -> [String: String] { ["TOKENSTORE_TPM_TCTI": tcti] }

    @Test("no usable TPM → 69 naming the TPM and why, when creating and when opening; nothing made")
    func noUsableTPM() throws {
        let store = try TokenctlStore()
        let nobody = try SoftwareTPM.unreachableTCTI()
        let created = try store.run(["--key-provider", "tpm", "put", "--account", "alice", "--kind", "generic"],
            stdin: "s3cret-value\n", environment: Self.tpm(nobody))
        #expect(created.exitCode == 69, "\(created.standardError)")
        #expect(created.standardError.contains("TPM") && created.standardError.contains(nobody), "\(created.standardError)")
        #expect(created.standardError.contains("did not answer") && created.standardError.contains("[tpmUnavailable]"))
        let device = try store.run(["put", "--account", "alice", "--kind", "generic"], stdin: "s3cret-value\n",
            environment: ["TOKENSTORE_TPM_TCTI": "device:/nonexistent/tpmrm0", "TOKENCTL_KEY_PROVIDER": "tpm"])
        #expect(device.exitCode == 69, "\(device.standardError)")
        #expect(device.standardError.contains("TPM") && device.standardError.contains("does not exist"), "\(device.standardError)")

        // Opening: a store made on a TPM, then that TPM gone.
        let tpm = try SoftwareTPM.start()
        let made = try TokenctlStore()
        #expect(try made.run(["--key-provider", "tpm", "put", "--account", "alice", "--kind", "generic"],
            stdin: "s3cret-value\n", environment: Self.tpm(tpm.tcti)).exitCode == 0)
        tpm.stop()
        let opened = try made.run(["--key-provider", "tpm", "get", "--account", "alice", "--kind", "generic", "--reveal"],
            environment: Self.tpm(tpm.tcti))
        #expect(opened.exitCode == 69, "\(opened.standardError)")
        #expect(opened.standardError.contains("TPM") && opened.standardError.contains("did not answer"))
        #expect(!opened.standardOutput.contains("s3cret-value") && !opened.standardError.contains("s3cret-value"))
    }

    @Test("a TPM device this user may not open → 69 saying permission denied and naming the group; nothing is made",
          .enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root to run tokenctl as uid 65534"))
    func deviceWithoutPermission() throws {
        // A root-owned 0600 file stands for /dev/tpmrm0 (group tss): tokenctl runs as uid 65534.
        let directory = try TemporaryDirectory(prefix: "tokenctl-tpm-permission")
        let device = directory.appending("tpmrm0").path
        #expect(FileManager.default.createFile(atPath: device, contents: Data(), attributes: [.posixPermissions: 0o600]))
        let storeDirectory = directory.appending("store").path
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: false)
        let home = directory.appending("home").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        #expect(chown(storeDirectory, 65534, 65534) == 0 && chown(home, 65534, 65534) == 0 && chmod(directory.path, 0o755) == 0)
        let result = try ChildProcess.run(
            "/usr/bin/setpriv",
            ["--reuid", "65534", "--regid", "65534", "--clear-groups", "--", TokenctlBinary.url.path,
             "--store", storeDirectory + "/tokens.sqlite", "--key-provider", "tpm", "put", "--account", "alice", "--kind", "generic"],
            environment: ["PATH": "/usr/bin:/bin", "HOME": home, "TOKENSTORE_TPM_TCTI": "device:\(device)"],
            input: Data("s3cret-value\n".utf8), timeout: .seconds(60))
        #expect(result.termination.code == 69, "\(result)")
        #expect(result.standardErrorText.contains("TPM") && result.standardErrorText.contains("permission denied"), "\(result)")
        #expect(result.standardErrorText.contains("'tss'") && !result.standardErrorText.contains("s3cret-value"))
        let left = try FileManager.default.contentsOfDirectory(atPath: storeDirectory)
        #expect(left.isEmpty, "a failed first open left files: \(left)")
    }

    @Test("another TPM → 65 naming it, no secret, no reset; the right TPM opens the same files again")
    func anotherTPM() throws {
        let first = try SoftwareTPM.start()
        let second = try SoftwareTPM.start()
        let store = try TokenctlStore()
        let put = try store.run(["--key-provider", "tpm", "put", "--account", "alice", "--kind", "generic"],
            stdin: "s3cret-value\n", environment: Self.tpm(first.tcti))
        #expect(put.exitCode == 0, "\(put.standardError)")
        let before = FileManager.default.contents(atPath: store.path)

        for command in [["get", "--account", "alice", "--kind", "generic", "--reveal"], ["list"]] {
            let result = try store.run(["--key-provider", "tpm"] + command, environment: Self.tpm(second.tcti))
            #expect(result.exitCode == 65, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("[tpmMismatch]") && result.standardError.contains(second.tcti), "\(result.standardError)")
            #expect(!result.standardError.lowercased().contains("reset"), "\(result.standardError)")
            #expect(!result.standardOutput.contains("s3cret-value") && !result.standardError.contains("s3cret-value"))
        }
        #expect(FileManager.default.contents(atPath: store.path) == before, "a refused command changed the store file")

        let get = try store.run(["get", "--account", "alice", "--kind", "generic", "--reveal"],
            environment: ["TOKENSTORE_TPM_TCTI": first.tcti, "TOKENCTL_KEY_PROVIDER": "tpm"])
        #expect(get.exitCode == 0 && get.standardOutput.contains("s3cret-value"), "\(get.standardError)")

        // Without --key-provider tpm the store says which provider it needs (78), never "missing".
        let plain = try store.run(["list"], environment: Self.tpm(first.tcti))
        #expect(plain.exitCode == 78 && plain.standardError.contains("--key-provider tpm"), "\(plain.standardError)")

        // swtpm is a software TPM: not the hardware tier (the tier is softwareTPM, tpm.simulator true).
        let status = try store.json(["--key-provider", "tpm", "status"], environment: Self.tpm(first.tcti))
        #expect(status.result.exitCode == 0)
        #expect(status.object["protection"] as? String == "softwareTPM" && status.object["recordedKeyProvider"] as? String == "tpm")
        #expect((status.object["protectionReason"] as? String ?? "").contains("software TPM"), "\(status.object)")
        let tpm = status.object["tpm"] as? [String: Any]
        #expect(tpm?["available"] as? Bool == true && tpm?["reason"] as? String == "", "\(tpm ?? [:])")
        #expect(tpm?["simulator"] as? Bool == true, "\(tpm ?? [:])")
        let text = try store.run(["--key-provider", "tpm", "status"], environment: Self.tpm(first.tcti))
        #expect(text.exitCode == 0 && text.standardOutput.contains("protection           softwareTPM ("), "\(text.standardOutput)")
        #expect(!text.standardOutput.contains("protection           hardware"), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("is a software TPM"), "\(text.standardOutput)")
    }

    @Test("status on a keyring store with no TPM reachable: 0, storeID kept, protection keyring, tpm unavailable with a reason")
    func keyringStoreStatusWithoutTPM() throws {
        let store = try TokenctlStore()
        try store.put("s3cret-value")
        let status = try store.json(["status"], environment: Self.tpm(try SoftwareTPM.unreachableTCTI()))
        #expect(status.result.exitCode == 0, "\(status.result.standardError)")
        #expect((status.object["storeID"] as? String)?.count == 32)
        #expect(status.object["protection"] as? String == "keyring")
        let tpm = status.object["tpm"] as? [String: Any]
        #expect(tpm?["available"] as? Bool == false, "\(tpm ?? [:])")
        #expect(tpm?["simulator"] as? Bool == true, "a swtpm TCTI is a software TPM, reachable or not: \(tpm ?? [:])")
        let reason = tpm?["reason"] as? String ?? ""
        #expect(reason.contains("TPM"), "\(tpm ?? [:])")
        #expect(((status.object["protectionReason"] as? String) ?? "").isEmpty == false)
        let text = try store.run(["status"], environment: Self.tpm(try SoftwareTPM.unreachableTCTI()))
        #expect(text.exitCode == 0 && text.standardOutput.contains("protection           keyring ("), "\(text.standardOutput)")
    }

    @Test("status on a TPM store that cannot open (no TPM, another TPM): exit 0, keyState tpmUnavailable / tpmMismatch with the reason, never 'opens normally'")
    func statusOfATPMStoreThatCannotOpen() throws {
        let first = try SoftwareTPM.start()
        let second = try SoftwareTPM.start()
        let store = try TokenctlStore()
        let put = try store.run(["--key-provider", "tpm", "put", "--account", "alice", "--kind", "generic"],
            stdin: "s3cret-value\n", environment: Self.tpm(first.tcti))
        #expect(put.exitCode == 0, "\(put.standardError)")
        let before = FileManager.default.contents(atPath: store.path)

        // Another machine's TPM: the same reason `list` gives (tpmMismatch, exit 65 there).
        let list = try store.run(["--key-provider", "tpm", "list"], environment: Self.tpm(second.tcti))
        #expect(list.exitCode == 65 && list.standardError.contains("[tpmMismatch]"), "\(list.standardError)")
        let other = try store.json(["--key-provider", "tpm", "status"], environment: Self.tpm(second.tcti))
        #expect(other.result.exitCode == 0, "\(other.result.standardError)")
        #expect(other.object["keyState"] as? String == "tpmMismatch", "\(other.object)")
        let mismatch = other.object["keyStateExplanation"] as? String ?? ""
        #expect(mismatch.contains("cannot be opened") && mismatch.contains("another TPM") && mismatch.contains("[tpmMismatch]"), "\(mismatch)")
        #expect(!mismatch.contains("opens normally") && !mismatch.lowercased().contains("reset"), "\(mismatch)")
        let otherText = try store.run(["--key-provider", "tpm", "status"], environment: Self.tpm(second.tcti))
        #expect(otherText.exitCode == 0 && otherText.standardOutput.contains("key state            tpmMismatch"), "\(otherText.standardOutput)")
        #expect(!otherText.standardOutput.contains("opens normally"), "\(otherText.standardOutput)")

        // No TPM at all: the reason `list` gives (tpmUnavailable, exit 69 there).
        let nobody = try SoftwareTPM.unreachableTCTI()
        let none = try store.json(["--key-provider", "tpm", "status"], environment: Self.tpm(nobody))
        #expect(none.result.exitCode == 0, "\(none.result.standardError)")
        #expect(none.object["keyState"] as? String == "tpmUnavailable", "\(none.object)")
        let unavailable = none.object["keyStateExplanation"] as? String ?? ""
        #expect(unavailable.contains("cannot be opened") && unavailable.contains("did not answer")
            && unavailable.contains("[tpmUnavailable]") && unavailable.contains(nobody), "\(unavailable)")
        #expect(!unavailable.contains("opens normally"), "\(unavailable)")
        #expect((none.object["tpm"] as? [String: Any])?["available"] as? Bool == false)
        let noneText = try store.run(["--key-provider", "tpm", "status"], environment: Self.tpm(nobody))
        #expect(noneText.exitCode == 0 && noneText.standardOutput.contains("key state            tpmUnavailable"), "\(noneText.standardOutput)")
        #expect(!noneText.standardOutput.contains("opens normally"), "\(noneText.standardOutput)")
        #expect(FileManager.default.contents(atPath: store.path) == before, "status changed the store file")

        // The right TPM: present, and the store opens normally.
        let right = try store.json(["--key-provider", "tpm", "status"], environment: Self.tpm(first.tcti))
        #expect(right.object["keyState"] as? String == "present", "\(right.object)")
        #expect((right.object["keyStateExplanation"] as? String ?? "").contains("opens normally"))
        #expect(!String(decoding: try store.run(["--key-provider", "tpm", "status"], environment: Self.tpm(first.tcti)).standardOutput.utf8, as: UTF8.self).contains("s3cret-value"))
    }

    @Test("a TPM store with login --dpop: token DPoP, a proof the server accepts, bound to the key the TPM holds; no TPM, no proof (69)")
    func dpopOnATPMStore() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let fixture = try SessionCommandTests.Fixture()
        let tpmEnvironment = Self.tpm(tpm.tcti).merging(["TOKENCTL_KEY_PROVIDER": "tpm"]) { _, given in given }
        let environment = fixture.environment.merging(tpmEnvironment) { _, given in given }
        let login = try DPoPCommandTests.loginDPoP(fixture, environment: tpmEnvironment)
        #expect(login.exitCode == 0, "\(login.standardError)")
        #expect(try fixture.store.json(["status"], environment: environment).object["protection"] as? String == "softwareTPM")
        let token = try fixture.store.json(["token", "--account", "alice", "--reveal"], environment: environment)
        #expect(token.object["tokenType"] as? String == "DPoP", "\(token.result.standardError)")
        let accessToken = try #require(token.object["accessToken"] as? String)
        let url = fixture.server.baseURL.absoluteString + "/userinfo"
        let result = try fixture.store.run(["proof", "--account", "alice", "--method", "GET", "--url", url], environment: environment)
        #expect(result.exitCode == 0, "\(result.standardError)")
        let proof = result.standardOutput.trimmingCharacters(in: .newlines)
        let verdict = try fixture.server.checkDPoPProof(proof, method: "GET", url: url, accessToken: accessToken)
        #expect(verdict.error == nil, "\(verdict.description ?? "")")
        let boundTo = try fixture.server.introspect(accessToken).jkt
        #expect(verdict.jkt != nil && verdict.jkt == boundTo, "the token is bound to the proving key")
        // A proof is good once (the check above spent its jti): the API call gets a fresh one.
        let fresh = try fixture.store.run(["proof", "--account", "alice", "--method", "GET", "--url", url], environment: environment)
        #expect(fresh.standardOutput != result.standardOutput, "a fresh jti each proof")
        #expect(try fixture.server.userinfoStatus(
            authorization: "DPoP " + accessToken, dpop: fresh.standardOutput.trimmingCharacters(in: .newlines)) == 200)
        // Without the TPM the store does not open: no proof, no fallback to a software key.
        tpm.stop()
        let without = try fixture.store.run(["proof", "--account", "alice", "--method", "GET", "--url", url], environment: environment)
        #expect(without.exitCode == 69 && without.standardError.contains("TPM"), "\(without.standardError)")
        #expect(without.standardOutput.isEmpty)
    }
}
