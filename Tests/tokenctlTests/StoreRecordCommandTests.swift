import Foundation
import TestTraits
import Testing
import TestSupport

/// Issue 24, items 8 and 9, through the binary: a stripped outbox MAC (review N11), and a store
/// opened with another key provider than the one that made its key (review N7, the new-user
/// trial's passphrase reset that destroyed every item).
@Suite("tokenctl: stripped MACs and the recorded key provider", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct StoreRecordCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    @Test("the review's N11 experiment: MAC stripped and schedule forged after an offline logout → verify 65, pending and resume say so")
    func strippedOutboxMAC() throws {
        let fixture = try Fixture()
        let userID = "000321.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        fixture.server.stopTemporarily()
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 75)
        _ = try fixture.store.sqlite(
            "UPDATE pending_revocations SET mac = NULL, failed_code = 'invalidClient', last_error = 'forged', attempts = 99")

        let verify = try fixture.json(["verify"])
        #expect(verify.result.exitCode == 65, "\(verify.result.standardError)")
        let bad = verify.object["badRows"] as? [[String: Any]] ?? []
        #expect(bad.contains { $0["table"] as? String == "pending_revocations" }, "\(bad)")
        let pending = try fixture.run(["pending"])
        #expect(pending.exitCode == 65)
        #expect(pending.standardOutput.contains("[UNREADABLE]"), "\(pending.standardOutput)")
        #expect(!pending.standardOutput.contains("forged") && !pending.standardOutput.contains("invalidClient"))

        try fixture.server.restart()
        let resume = try fixture.json(["resume", "--all"])
        #expect(resume.result.exitCode == 65, "\(resume.result.standardError)")
        #expect(resume.object["unreadable"] as? Int == 1 && resume.object["revoked"] as? Int == 0, "\(resume.object)")
        #expect(resume.result.standardError.contains("do not open"))
    }

    @Test("the trial's row: a passphrase store without --passphrase-fd → 78 naming the passphrase provider; reset refuses; with it every item is there")
    func passphraseStoreWithoutPassphrase() throws {
        let store = try TokenctlStore()
        let file = store.directory.appending("passphrase")
        try Data("correct horse battery staple\n".utf8).write(to: file)
        let state = store.directory.appending("state").path
        func withPassphrase(_ arguments: String, input: String = "") throws -> PrivateKeyring.ProcessResult {
            try PrivateKeyring.run(
                "/bin/sh",
                ["-c", "XDG_STATE_HOME=\"$3\" exec \"$0\" --store \"$1\" --passphrase-fd 3 \(arguments) 3<\"$2\"",
                 TokenctlBinary.url.path, store.path, file.path, state],
                input: Data(input.utf8), timeout: .seconds(120))
        }
        for n in 0..<3 {
            #expect(try withPassphrase("put --account user\(n) --kind generic", input: "secret-\(n)\n").status == 0)
        }
        let before = FileManager.default.contents(atPath: store.path)

        let environment = ["XDG_STATE_HOME": state]
        for command in [["list"], ["get", "--account", "user0", "--kind", "generic"], ["reset", "--yes"], ["destroy", "--yes"]] {
            let result = try store.run(command, environment: environment)
            #expect(result.exitCode == 78, "\(command): \(result.exitCode) \(result.standardError)")
            #expect(result.standardError.contains("[wrongKeyProvider]"), "\(command): \(result.standardError)")
            #expect(result.standardError.contains("'passphrase'"))
            #expect(result.standardError.contains("passphrase-wrapped: open it with --passphrase-fd N"), "\(result.standardError)")
            #expect(!result.standardError.contains("dataKeyMissing") && !result.standardError.contains("reset --yes"))
        }
        #expect(FileManager.default.contents(atPath: store.path) == before, "a refused command changed the store file")

        let status = try store.json(["status"], environment: environment)
        #expect(status.result.exitCode == 0)
        #expect(status.object["recordedKeyProvider"] as? String == "passphrase")
        let explanation = status.object["keyStateExplanation"] as? String ?? ""
        #expect(explanation.contains("--passphrase-fd") && !explanation.contains("start over"), "\(explanation)")
        // Trial 2: the key state read "missing", which the docs say means "reset"; nothing is lost.
        #expect(status.object["keyState"] as? String == "needsPassphrase")
        let statusText = try store.run(["status"], environment: environment).standardOutput
        #expect(statusText.contains("recorded provider"))
        #expect(statusText.contains("key state            needsPassphrase\n"), "\(statusText)")

        let list = try withPassphrase("list")
        #expect(list.status == 0, "\(list)")
        for n in 0..<3 { #expect(list.standardOutput.contains("user\(n)")) }
        let get = try withPassphrase("get --account user2 --kind generic --reveal")
        #expect(get.standardOutput.contains("secret-2"))
    }

    @Test("a Secret Service store opened with --key-provider portal → 78 naming secret-service, nothing changed")
    func secretServiceStoreWithPortal() throws {
        let store = try TokenctlStore()
        #expect(try store.run(["put", "--account", "bob", "--kind", "generic"], stdin: "kept\n").exitCode == 0)
        let storeID = try store.sqlite("SELECT hex(store_id) FROM store_info").lowercased()
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let result = try store.run(["--key-provider", "portal", "get", "--account", "bob", "--kind", "generic"])
        #expect(result.exitCode == 78, "\(result.standardError)")
        #expect(result.standardError.contains("[wrongKeyProvider]") && result.standardError.contains("'secret-service'"))
        #expect(result.standardError.contains("--key-provider secret-service"), "\(result.standardError)")
        #expect(try store.run(["get", "--account", "bob", "--kind", "generic", "--reveal"]).standardOutput.contains("kept"))
    }
}
