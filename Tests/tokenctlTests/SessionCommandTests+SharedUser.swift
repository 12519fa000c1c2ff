import Foundation
import Testing
import TestSupport

/// New-user trial 2: two accounts signed in as one user; logging alice out showed bob's user
/// `revoked` while bob's refresh token still worked.
extension SessionCommandTests {
    @Test("two accounts of one user: logging alice out leaves the user authorized (history says why); bob renews; bob's logout revokes")
    func sharedUserLogout() throws {
        let fixture = try Fixture()
        let user = "000677.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: user).exitCode == 0)
        #expect(try fixture.login(account: "bob", userID: user).exitCode == 0)

        let logout = try fixture.json(["logout", "--account", "alice"])
        #expect(logout.result.exitCode == 0, "\(logout.result.standardError)")
        #expect(logout.object["outcome"] as? String == "revoked")
        #expect(try fixture.run(["state", user]).standardOutput == "authorized\n")
        let history = try fixture.json(["history", user])
        let last = (history.object["transitions"] as? [[String: Any]])?.last ?? [:]
        #expect(last["from"] as? String == "authorized" && last["to"] as? String == "authorized", "\(history.result.standardOutput)")
        #expect(last["reason"] as? String == "userLogout")
        #expect(last["detail"] as? String == "otherAccountSignedIn")
        let accounts = try fixture.json(["accounts"]).object["accounts"] as? [[String: Any]] ?? []
        #expect(accounts.map { $0["account"] as? String } == ["bob"])
        #expect(accounts.first?["state"] as? String == "authorized")

        let token = try fixture.json(["token", "--account", "bob", "--force"])
        #expect(token.result.exitCode == 0, "\(token.result.standardError)")
        #expect(token.object["source"] as? String == "network")

        let second = try fixture.json(["logout", "--account", "bob"])
        #expect(second.object["outcome"] as? String == "revoked", "\(second.result.standardError)")
        #expect(try fixture.run(["state", user]).standardOutput == "revoked\n")
    }
}
