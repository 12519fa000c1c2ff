import Foundation
import Testing
import TestSupport

/// `tokenctl resume [--all]`: due entries only, or every entry.
extension SessionCommandTests {
    @Test("resume retries only due entries (75 while one waits, no request); resume --all retries it now (0)")
    func resumeDueOrAll() throws {
        let fixture = try Fixture()
        let userID = "000811.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        let refreshToken = try #require(
            try fixture.store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)

        // 429 asking for an hour: the client gives up at once and the entry waits 60 s (the cap).
        try fixture.server.inject(.status(429, path: "/oauth/revoke", count: 1, retryAfter: "3600"))
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 75)
        let revokeRequests = try fixture.server.stats().revokeRequests

        let notDue = try fixture.json(["resume"])
        #expect(notDue.result.exitCode == 75, "\(notDue.result.standardError)")
        #expect(notDue.object["notDue"] as? Int == 1)
        #expect(notDue.object["revoked"] as? Int == 0)
        #expect(notDue.object["remaining"] as? Int == 1)
        #expect(try fixture.server.stats().revokeRequests == revokeRequests)
        let text = try fixture.run(["resume"])
        #expect(text.exitCode == 75)
        #expect(text.standardOutput.contains("not due yet              1\n"), "\(text.standardOutput)")
        #expect(try fixture.server.introspect(refreshToken).active)

        let all = try fixture.json(["resume", "--all"])
        #expect(all.result.exitCode == 0, "\(all.result.standardError)")
        #expect(all.object["revoked"] as? Int == 1)
        #expect(all.object["notDue"] as? Int == 0)
        #expect(all.object["remaining"] as? Int == 0)
        #expect(try fixture.server.introspect(refreshToken).active == false)

        // Nothing left: 0 either way.
        #expect(try fixture.run(["resume"]).exitCode == 0)
    }
}
