import Foundation
import Testing
import TestSupport

/// `tokenctl accounts`: the store's accounts with user id, state and cached audiences.
extension SessionCommandTests {
    @Test("accounts after two sign-ins and one logout: the signed-in one with its audiences, text and JSON")
    func accountsList() throws {
        let fixture = try Fixture()
        let alice = "000611.\(UUID().uuidString.prefix(8)).apple"
        let bob = "000622.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: alice).exitCode == 0)
        #expect(try fixture.login(account: "bob", userID: bob).exitCode == 0)
        #expect(try fixture.run(["token", "--account", "alice", "--audience", Self.apiA]).exitCode == 0)
        // An account with only a generic item: no user id, no cached token.
        try fixture.store.put("not-a-session-secret", account: "carol")

        let both = try fixture.json(["accounts"])
        #expect(both.result.exitCode == 0, "\(both.result.standardError)")
        #expect((both.object["accounts"] as? [[String: Any]])?.compactMap { $0["account"] as? String } == ["alice", "bob", "carol"])

        #expect(try fixture.json(["logout", "--account", "bob"]).object["outcome"] as? String == "revoked")
        let listed = try fixture.json(["accounts"])
        #expect(listed.result.exitCode == 0, "\(listed.result.standardError)")
        expectKeys(listed.object, ["accounts"])
        let accounts = listed.object["accounts"] as? [[String: Any]] ?? []
        #expect(accounts.count == 2, "\(accounts)")
        guard accounts.count == 2 else { return }
        // canRenew and loggingOut since trial 2 (keys are added, never removed).
        for account in accounts {
            expectKeys(account, ["account", "service", "userID", "state", "audiences", "canRenew", "loggingOut"])
            #expect(account["loggingOut"] as? Bool == false)
        }
        #expect(accounts.map { $0["canRenew"] as? Bool } == [true, false])
        #expect(accounts[0]["account"] as? String == "alice")
        #expect(accounts[0]["service"] as? String == "auth0")
        #expect(accounts[0]["userID"] as? String == alice)
        #expect(accounts[0]["state"] as? String == "authorized")
        // The sign-in's token (the default audience, JSON null) and the one for API A.
        let audiences = accounts[0]["audiences"] as? [Any] ?? []
        #expect(audiences.count == 2, "\(audiences)")
        #expect(audiences.first is NSNull)
        #expect(audiences.last as? String == Self.apiA)
        #expect(accounts[1]["account"] as? String == "carol")
        #expect(accounts[1]["userID"] is NSNull)
        #expect(accounts[1]["state"] as? String == "notFound")
        #expect((accounts[1]["audiences"] as? [Any])?.isEmpty == true)
        #expect(try fixture.run(["state", bob]).standardOutput == "revoked\n")

        let text = try fixture.run(["accounts"])
        #expect(text.exitCode == 0)
        let lines = text.standardOutput.split(separator: "\n")
        #expect(lines.count == 3, "\(text.standardOutput)")
        // The default service shows as "(default)" since trial 2, so the columns are wider than with "auth0".
        #expect(lines.first?.split(separator: " ").prefix(4) == ["SERVICE", "ACCOUNT", "USER", "ID"], "\(text.standardOutput)")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("(default)  ") }, "\(text.standardOutput)")
        #expect(lines.dropFirst().first?.contains("authorized  (default) \(Self.apiA)") == true, "\(text.standardOutput)")
        #expect(lines.last?.hasSuffix("notFound    -") == true, "\(text.standardOutput)")

        // No --domain or --client-id needed: the command reads the store only.
        #expect(try fixture.store.run(["accounts"]).standardOutput == text.standardOutput)
    }

    @Test("accounts on a store without accounts")
    func accountsEmpty() throws {
        let store = try TokenctlStore()
        try store.put("x", account: "alice")
        #expect(try store.run(["delete", "--account", "alice", "--kind", "generic"]).exitCode == 0)
        #expect(try store.run(["accounts"]).standardOutput == "No accounts.\n")
        let json = try store.json(["accounts"])
        #expect(json.result.exitCode == 0)
        #expect((json.object["accounts"] as? [Any])?.isEmpty == true)
    }
}
