import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// keyring_faults: the real gnome-keyring failing under a store that holds sealed rows —
/// no bus, a bus without the daemon, the collection locked, the key item deleted, a key of
/// the wrong length, two items matching, a wrong key, the daemon stopped (hung) and the daemon
/// killed mid-session. Each must be a typed error; no new key may be made while sealed rows
/// exist, and no row may be deleted.
///
/// The faults that lock, stop or kill the daemon run in a child process with a private bus
/// and gnome-keyring of its own (a nested `scripts/with-keyring`), so they never disturb
/// suites using the shared keyring at the same time. The no-bus faults run the test child
/// with the bus taken away.
@Suite("Reliability: keyring_faults", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyringFaultTests {
    static let scenarioVariable = "TOKENSTORE_KEYRING_FAULT_REPORT"

    @Test("every keyring fault is a typed error; no key regenerated, no row lost")
    func keyringFaults() throws {
        var faults: [String: String] = [:]
        var regenerations = 0, rowsLost = 0

        // No bus, and a bus on which no Secret Service runs: a separate process each (libsecret
        // keeps its connection per process), against a store made in the shared keyring.
        let t = try TestStore()
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "user", accessToken: nil)
        let itemsBefore = try t.store.counts().items
        let storeID = t.store.storeIdentifier
        let keyID = t.store.keyIdentifier
        t.store.close()
        let child = try Reliability.child().path
        for (name, bus) in [("no_bus", PrivateKeyring.ChildBus.none), ("daemon_absent", .withoutSecretService)] {
            let result = try PrivateKeyring.runChild(on: bus, executable: child, arguments: ["open", t.path], timeout: .seconds(60))
            let code = TokenStoreError.Code.allCases.first { result.standardError.contains("TokenStoreError.\($0.rawValue)") }
            faults[name] = code?.rawValue ?? "exit \(result.status)"
            #expect(code == .secretServiceUnavailable, "\(name): \(result)")
        }
        let raw = try t.rawDatabase()
        rowsLost += itemsBefore - Int(try raw.scalarInt("SELECT count(*) FROM items") ?? 0)
        let keyRows = Int(try raw.scalarInt("SELECT count(*) FROM data_keys") ?? 0)
        let keyItems = try PrivateKeyring.itemCount(attributes: ["store-id": storeID])
        regenerations += (keyRows - 1) + (keyItems - 1)
        #expect(try t.reopen().keyIdentifier == keyID)

        // The rest in a keyring of the child's own.
        let directory = try TemporaryDirectory(prefix: "tokenstore-keyring-faults")
        let reportURL = directory.appending("report.txt")
        let result = try PrivateKeyring.runChild(
            on: .ownPrivateKeyring, executable: try PrivateKeyring.currentExecutable(),
            arguments: ["--testing-library", "swift-testing", "--filter", "keyringFaultChildScenario"],
            environment: [Self.scenarioVariable: reportURL.path], timeout: .seconds(240))
        let text = (try? String(contentsOf: reportURL, encoding: .utf8)) ?? ""
        let report = ChildReport(text: text, process: result)
        #expect(result.status == 0, "child failed: \(report)")
        #expect(report.lines.last?.0 == "done", "the child scenario did not finish: \(report)")
        report.expect([
            ("locked", "keyringLocked"),
            ("locked-new-store", "keyringLocked"),
            ("locked-new-store-no-key-recorded", "no file"),
            ("locked-after-unlock", "match"),
            ("locked-new-store-still-no-key", "no file"),
            ("key-deleted", "dataKeyMissing"),
            ("key-deleted-again", "dataKeyMissing"),
            ("wrong-length", "dataKeyCorrupt"),
            ("two-items", "dataKeyCorrupt"),
            ("wrong-key", "dataKeyCorrupt"),
            ("restored", "match"),
            ("hung", "timedOut"),
            ("hung-after-continue", "match"),
            ("killed-open-store-reads", "match"),
            ("killed-open-store-writes", "ok"),
            ("killed-reopen-typed", "ok"),
            ("killed-after-restart", "match"),
        ])
        for (fault, step) in [("locked", "locked"), ("key_deleted", "key-deleted"), ("wrong_length", "wrong-length"),
                              ("two_items", "two-items"), ("wrong_key", "wrong-key"), ("hung", "hung"),
                              ("killed_mid_session", "killed-reopen")] {
            faults[fault] = report.outcome(step) ?? "missing"
        }
        let childRegenerations = Int(report.outcome("regenerations") ?? "") ?? -1
        let childRowsLost = Int(report.outcome("rows-lost") ?? "") ?? -1
        #expect(childRegenerations == 0, "\(report)")
        #expect(childRowsLost == 0, "\(report)")
        regenerations += max(childRegenerations, 0)
        rowsLost += max(childRowsLost, 0)

        let typed = faults.values.filter { TokenStoreError.Code(known: $0) != nil }.count
        Reliability.metric("keyring_faults", [
            "fault_kinds": faults.count, "typed_errors": typed,
            "silent_key_regenerations": regenerations, "rows_lost": rowsLost,
            "outcomes": faults.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ","),
        ])
        #expect(faults.count >= 9)
        #expect(typed == faults.count, "\(faults)")
        #expect(regenerations == 0)
        #expect(rowsLost == 0)
    }
}

@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct KeyringFaultChildScenarioEntry {
    /// The child half of ``KeyringFaultTests``; runs only inside its own private keyring.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[KeyringFaultTests.scenarioVariable] != nil, "runs only as a child scenario"))
    func keyringFaultChildScenario() throws {
        let path = try #require(ProcessInfo.processInfo.environment[KeyringFaultTests.scenarioVariable])
        let report = ChildReportWriter(path: path)
        defer { report.record("done", "ok") }
        try runFaults(report)
    }

    private func runFaults(_ report: ChildReportWriter) throws {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("alice-rt"), appleUserID: "alice-user",
            accessToken: AccessTokenEntry(token: secret("at"), expiresAt: Date() + 3600, scopes: ["openid"]))
        try t.store.set(secret("bob-rt"), for: key("bob"))
        _ = try t.store.ledger.beginLogout(account: "bob")
        let reference = DataKeyReference(storeID: t.store.storeIdentifier, keyID: t.store.keyIdentifier, appID: testAppID)
        let material = t.store.connection.envelope.key.material.copyBytes()
        let raw = try t.rawDatabase()
        func rows() throws -> Int {
            Int(try raw.scalarInt(
                "SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending_revocations) + (SELECT count(*) FROM credential_states)") ?? 0)
        }
        let rowsBefore = try rows()
        t.store.close()
        var regenerations = 0
        /// A new key shows as a second data_keys row, another active key id, or an extra keyring item.
        func checkNoNewKey(planted: Int) throws {
            let keyRows = Int(try raw.scalarInt("SELECT count(*) FROM data_keys") ?? 0)
            let active = try raw.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", []) { Hex.encode($0.blob(0)) }
            let items = try PrivateKeyring.itemCount(attributes: ["store-id": reference.storeID])
            if keyRows != 1 || active != reference.keyID || items > planted { regenerations += 1 }
        }
        func readsBack(_ store: TokenStore) throws -> String {
            try store.refreshToken(account: "alice")?.stringValue() == "alice-rt" ? "match" : "mismatch"
        }
        func restore() throws {
            try PrivateKeyring.clearItems(storeID: reference.storeID)
            try SecretServiceKeyProvider().storeKey(SecretBytes(material), for: reference)
        }

        // Locked collection (moved from KeyFailureTests: it locks the daemon, so it runs here).
        try PrivateKeyring.lockDefaultCollection()
        report.step("locked") { _ = try t.reopen(); return "opened" }
        let fresh = try TemporaryDirectory()
        let freshPath = fresh.appending("tokens.sqlite").path
        report.step("locked-new-store") { _ = try TokenStore(path: freshPath, appID: testAppID); return "opened" }
        // Since issue 24 the failed first open removes the file it made: no key recorded, and no file left.
        func freshKeys() throws -> String {
            guard FileManager.default.fileExists(atPath: freshPath) else { return "no file" }
            return String(try Database(path: freshPath, readOnly: true).scalarInt("SELECT count(*) FROM data_keys") ?? -1)
        }
        report.step("locked-new-store-no-key-recorded") { try freshKeys() }
        try checkNoNewKey(planted: 1)
        try PrivateKeyring.unlockDefaultCollection()
        report.step("locked-after-unlock") { try readsBack(t.reopen()) }
        report.step("locked-new-store-still-no-key") { try freshKeys() }

        // Key item deleted (moved from KeyFailureTests).
        try PrivateKeyring.clearItems(storeID: reference.storeID)
        report.step("key-deleted") { _ = try t.reopen(); return "opened" }
        report.step("key-deleted-again") { _ = try t.reopen(); return "opened" }
        try checkNoNewKey(planted: 0)

        // A key of the wrong length under the right attributes.
        try PrivateKeyring.storeRawItem(
            attributes: ["xdg:schema": "dev.tokenstore.DataKey", "store-id": reference.storeID, "key-id": reference.keyID],
            secret: Array("short".utf8))
        report.step("wrong-length") { _ = try t.reopen(); return "opened" }
        try checkNoNewKey(planted: 1)

        // Two items matching: the right key, and another in the session collection.
        try restore()
        try PrivateKeyring.storeRawItem(
            attributes: ["xdg:schema": "dev.tokenstore.DataKey", "store-id": reference.storeID, "key-id": reference.keyID],
            secret: [UInt8](repeating: 7, count: 32), collection: "session")
        report.step("two-items") { _ = try t.reopen(); return "opened" }
        try checkNoNewKey(planted: 2)

        // A wrong key of the right length (moved from KeyFailureTests).
        try PrivateKeyring.clearItems(storeID: reference.storeID)
        try SecretServiceKeyProvider().storeKey(.random(count: 32), for: reference)
        report.step("wrong-key") { _ = try t.reopen(); return "opened" }
        try checkNoNewKey(planted: 1)
        try restore()
        report.step("restored") { try readsBack(t.reopen()) }

        // The daemon stopped (hung): bounded by the provider's timeout.
        let hungPID = try PrivateKeyring.secretServicePID()
        kill(hungPID, SIGSTOP)
        report.step("hung") {
            _ = try TokenStore(path: t.path, appID: testAppID, keyProvider: SecretServiceKeyProvider(timeout: .seconds(2)))
            return "opened"
        }
        kill(hungPID, SIGCONT)
        try checkNoNewKey(planted: 1)
        report.step("hung-after-continue") { try readsBack(t.reopen()) }

        // The daemon killed mid-session: the open store keeps its key; a new open is a typed
        // error (or, if D-Bus activation brought a daemon back, the key); then a daemon is restarted.
        let open = try t.reopen()
        let pid = try PrivateKeyring.secretServicePID()
        kill(pid, SIGKILL)
        var waited = 0
        while kill(pid, 0) == 0 && waited < 200 { usleep(10_000); waited += 1 }
        report.step("killed-open-store-reads") { try readsBack(open) }
        report.step("killed-open-store-writes") { try open.set(secret("carol-rt"), for: key("carol")); return "ok" }
        var reopenOutcome = "opened"
        do {
            let again = try TokenStore(path: t.path, appID: testAppID, keyProvider: SecretServiceKeyProvider(timeout: .seconds(5)))
            reopenOutcome = try readsBack(again) == "match" ? "opened" : "wrong key"
        } catch let error as TokenStoreError {
            reopenOutcome = error.code.rawValue
        }
        report.record("killed-reopen", reopenOutcome)
        report.record("killed-reopen-typed", reopenOutcome == "opened" || TokenStoreError.Code(known: reopenOutcome) != nil ? "ok" : "untyped")
        try restartDaemon(report)
        report.step("killed-after-restart") { try readsBack(t.reopen()) }
        try checkNoNewKey(planted: 1)

        report.record("rows-lost", String(rowsBefore + 1 - (try rows())))  // + carol's refresh token
        report.record("regenerations", String(regenerations))
    }

    /// Brings a Secret Service back: unlocks a daemon D-Bus activation started, or starts one.
    private func restartDaemon(_ report: ChildReportWriter) throws {
        if (try? PrivateKeyring.secretServicePID()) != nil, (try? PrivateKeyring.unlockDefaultCollection()) != nil {
            report.record("restart", "activated")
            return
        }
        guard let password = PrivateKeyring.password else { throw PrivateKeyringError("no keyring password") }
        let started = try PrivateKeyring.run(
            "gnome-keyring-daemon", ["--replace", "--unlock", "--components=secrets", "--daemonize"],
            input: Data(password.utf8), timeout: .seconds(20))
        report.record("restart", started.status == 0 ? "started" : "failed", "\(started)")
        var tries = 0
        while (try? PrivateKeyring.secretServicePID()) == nil && tries < 100 { usleep(50_000); tries += 1 }
        try? PrivateKeyring.unlockDefaultCollection()
    }
}
