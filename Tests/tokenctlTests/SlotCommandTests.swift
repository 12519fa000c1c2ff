import Foundation
import TestTraits
import Testing
import TestSupport

/// `slot list|add|remove`, `--recovery-key-fd` and `migrate-provider` through the binary, with
/// the real gnome-keyring; a passphrase slot's key file under a per-test XDG_STATE_HOME.
@Suite("tokenctl key slots", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SlotCommandTests {
    /// Runs `tokenctl --store PATH <arguments>` through sh, with `fd3`/`fd4` (when given) open
    /// as descriptors 3 and 4 and the test's XDG_STATE_HOME; `crash` arms a crash point.
    private func run(
        _ store: TokenctlStore, _ arguments: String, fd3: URL? = nil, fd4: URL? = nil, crash: String? = nil
    ) throws -> PrivateKeyring.ProcessResult {
        var environment = TokenctlStore.keyringEnvironment
        environment["XDG_STATE_HOME"] = store.directory.appending("state").path
        environment["PATH"] = "/usr/bin:/bin"
        environment["TOKENCTL_TEST_ARGON2"] = "interactive"  // debug builds: the minimum Argon2id cost, for speed
        if let crash { environment["TOKENSTORE_CRASH_POINT"] = crash }
        let redirections = (fd3.map { " 3<\"\($0.path)\"" } ?? "") + (fd4.map { " 4<\"\($0.path)\"" } ?? "")
        return try PrivateKeyring.run(
            "/bin/sh", ["-c", "exec \"$0\" --store \"$1\" \(arguments)\(redirections)", TokenctlBinary.url.path, store.path],
            environment: environment, timeout: .seconds(120))
    }

    private func write(_ store: TokenctlStore, _ name: String, _ text: String) throws -> URL {
        let url = store.directory.appending(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// Every canary reads back through `opening` (e.g. "--passphrase-fd 3" with `fd3`).
    private func expectRows(_ store: TokenctlStore, _ canaries: [String], _ opening: String = "", fd3: URL? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        for (n, canary) in canaries.enumerated() {
            let get = try run(store, "\(opening) get --account user\(n) --kind generic --reveal", fd3: fd3)
            #expect(get.status == 0 && get.standardOutput.contains(canary), "\(get)", sourceLocation: sourceLocation)
        }
    }

    private func fill(_ store: TokenctlStore) throws -> [String] {
        let canaries = (0..<3).map { _ in makeCanary() }
        for (n, canary) in canaries.enumerated() { try store.put(canary, account: "user\(n)") }
        return canaries
    }

    @Test("recovery: refused to a pipe without --force; after a keyring reset the recovery key opens every row; slot add keyring makes it usual")
    func recovery() throws {
        let store = try TokenctlStore()
        let canaries = try fill(store)
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let listed = try store.json(["slot", "list"])
        #expect((listed.object["slots"] as? [[String: Any]])?.compactMap { $0["kind"] as? String } == ["keyring"], "\(listed.result)")

        let refused = try store.run(["slot", "add", "recovery"])
        #expect(refused.exitCode == 64 && refused.standardOutput.isEmpty, "\(refused.standardError)")
        #expect((try store.json(["slot", "list"]).object["slots"] as? [Any])?.count == 1, "a refused add added a slot")

        let added = try store.json(["slot", "add", "recovery", "--force"], environment: ["TOKENCTL_TEST_ARGON2": "interactive"])
        #expect(added.result.exitCode == 0, "\(added.result.standardError)")
        let recoveryKey = try #require(added.object["recoveryKey"] as? String)
        #expect(recoveryKey.count == 80)
        let keyFile = try write(store, "recovery", recoveryKey + "\n")

        try PrivateKeyring.clearItems(storeID: storeID)  // the keyring is reset: key and epoch items gone
        let lost = try store.run(["get", "--account", "user0", "--kind", "generic"])
        #expect(lost.exitCode == 65 && lost.standardError.contains("[dataKeyMissing]"), "\(lost.standardError)")
        #expect(lost.standardError.contains("--recovery-key-fd"), "\(lost.standardError)")

        let reset = try store.run(["reset", "--yes"])
        #expect(reset.exitCode == 78 && reset.standardError.contains("other key slots"), "\(reset.standardError)")
        try expectRows(store, canaries, "--recovery-key-fd 3", fd3: keyFile)
        let mistyped = try write(store, "mistyped", String(recoveryKey.dropFirst()))
        #expect(try run(store, "--recovery-key-fd 3 status", fd3: mistyped).status == 64)
        let readd = try run(store, "--recovery-key-fd 3 slot add keyring", fd3: keyFile)
        #expect(readd.status == 0, "\(readd)")
        try expectRows(store, canaries)
        #expect(try store.run(["verify"]).exitCode == 0)
    }

    @Test("migrate-provider keyring → passphrase → keyring: every row reads back, the recorded provider follows, the old slot goes")
    func migrateBothWays() throws {
        let store = try TokenctlStore()
        let canaries = try fill(store)
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let phrase = try write(store, "phrase", "correct horse battery staple\n")

        let toPassphrase = try run(store, "--json migrate-provider --to passphrase --new-passphrase-fd 3", fd3: phrase)
        #expect(toPassphrase.status == 0, "\(toPassphrase)")
        #expect(try store.run(["list"]).exitCode == 78, "the keyring still opens a store migrated away from it")
        let status = try run(store, "--passphrase-fd 3 --json status", fd3: phrase)
        #expect(status.standardOutput.contains("\"keyProvider\": \"passphrase\""), "\(status)")
        // status finds the key where the passphrase slot files it (its own key id, not the data key's).
        #expect(status.standardOutput.contains("\"keyState\": \"present\""), "\(status)")
        #expect(status.standardOutput.contains("\"kind\": \"passphrase\"") && !status.standardOutput.contains("\"kind\": \"keyring\""))
        try expectRows(store, canaries, "--passphrase-fd 3", fd3: phrase)

        let back = try run(store, "--passphrase-fd 3 migrate-provider --to keyring", fd3: phrase)
        #expect(back.status == 0, "\(back)")
        try expectRows(store, canaries)
        let slots = try store.json(["slot", "list"]).object["slots"] as? [[String: Any]]
        #expect(slots?.compactMap { $0["kind"] as? String } == ["keyring"])
        let keyFiles = (try? FileManager.default.contentsOfDirectory(atPath: store.directory.appending("state/tokenstore/keys").path)) ?? []
        #expect(keyFiles.filter { $0.hasSuffix(".key") }.isEmpty, "the passphrase slot's key file was left: \(keyFiles)")
    }

    @Test("the keyring item gone, a TPM slot there: an open without --key-provider falls back to the TPM slot (real swtpm), no prompt, every row",
          .enabled(if: SoftwareTPM.isInstalled, "needs swtpm (scripts/install-deps)"))
    func unattendedFallbackToTPM() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let store = try TokenctlStore()
        let canaries = try fill(store)
        let status = try store.json(["status"]).object
        let storeID = try #require(status["storeID"] as? String), keyID = try #require(status["keyID"] as? String)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let environment = ["TOKENSTORE_TPM_TCTI": tpm.tcti]
        let added = try store.run(["slot", "add", "tpm"], environment: environment)
        #expect(added.exitCode == 0, "\(added.standardError)")
        // Only the first slot's item (filed under the data key's id) goes; the TPM slot's sealed item stays.
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": keyID]) == 1)
        #expect(try PrivateKeyring.run("secret-tool", ["clear", "store-id", storeID, "key-id", keyID]).status == 0)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": keyID]) == 0)
        #expect(try store.run(["get", "--account", "user0", "--kind", "generic"]).exitCode == 65, "opened without the TPM")
        for (n, canary) in canaries.enumerated() {
            let get = try store.run(["get", "--account", "user\(n)", "--kind", "generic", "--reveal"], environment: environment)
            #expect(get.exitCode == 0 && get.standardOutput.contains(canary), "\(get.standardError)")
        }
    }

    @Test("migrate-provider killed (SIGKILL) at each step: the store opens with the old or the new slot, and a re-run completes it")
    func migrateCrashAtEachStep() throws {
        for point in ["keySlots.afterStoreKey", "migrateProvider.afterAdd", "migrateProvider.afterVerify", "keySlots.afterRemove"] {
            let store = try TokenctlStore()
            let canaries = try fill(store)
            let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
            defer { try? PrivateKeyring.clearItems(storeID: storeID) }
            let phrase = try write(store, "phrase", "correct horse battery staple\n")
            let crashed = try run(store, "migrate-provider --to passphrase --new-passphrase-fd 3", fd3: phrase, crash: point)
            #expect(crashed.status == 137 && crashed.standardError.contains("crash point reached: \(point)"), "\(point): \(crashed)")
            let byKeyring = try store.run(["list"]).exitCode == 0
            let byPassphrase = try run(store, "--passphrase-fd 3 list", fd3: phrase).status == 0
            #expect(byKeyring || byPassphrase, "\(point): the store opens with neither slot")
            let opening = byKeyring ? "" : "--passphrase-fd 3"
            let rerun = try run(store, "\(opening) migrate-provider --to passphrase --new-passphrase-fd 4", fd3: phrase, fd4: phrase)
            #expect(rerun.status == 0, "\(point): \(rerun)")
            try expectRows(store, canaries, "--passphrase-fd 3", fd3: phrase)
            let slots = try run(store, "--passphrase-fd 3 --json slot list", fd3: phrase)
            #expect(slots.standardOutput.contains("\"passphrase\"") && !slots.standardOutput.contains("\"keyring\""), "\(point): \(slots)")
        }
    }
}
