import Foundation
import Testing
import TestSupport

/// `tokenctl clear`: local entries removed, nothing revoked at the server.
extension SessionCommandTests {
    @Test("clear --yes: entries gone here, refresh token still active at the server, history says clearedLocally")
    func clearLocally() throws {
        let fixture = try Fixture()
        let userID = "000711.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        #expect(try fixture.run(["token", "--account", "alice", "--audience", Self.apiA]).exitCode == 0)
        let refreshToken = try #require(
            try fixture.store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)
        let revokeRequests = try fixture.server.stats().revokeRequests

        // Without --yes: a usage error, nothing removed.
        let unconfirmed = try fixture.store.run(["clear", "--account", "alice"])
        #expect(unconfirmed.exitCode == 64)
        #expect(unconfirmed.standardError.hasPrefix("tokenctl: error: missing required option '--yes'\n"))
        #expect(try fixture.run(["state", userID]).standardOutput == "authorized\n")

        // No --domain or --client-id: no server is contacted.
        let cleared = try fixture.store.json(["clear", "--account", "alice", "--yes"])
        #expect(cleared.result.exitCode == 0, "\(cleared.result.standardError)")
        expectKeys(cleared.object, ["cleared", "service", "account"])
        #expect(cleared.object["cleared"] as? Bool == true)
        #expect(
            cleared.result.standardError
                == "tokenctl: warning: the refresh token was not revoked: it stays valid at the server until it "
                + "expires ('tokenctl logout' revokes)\n")
        #expect(try fixture.server.introspect(refreshToken).active)
        #expect(try fixture.server.stats().revokeRequests == revokeRequests)

        #expect(try fixture.run(["state", userID]).standardOutput == "revoked\n")
        let history = try fixture.json(["history", userID])
        let last = (history.object["transitions"] as? [[String: Any]])?.last ?? [:]
        #expect(last["to"] as? String == "revoked")
        #expect(last["reason"] as? String == "clearedLocally")
        #expect(last["detail"] as? String == "notRevokedAtServer")
        #expect(try fixture.run(["history", userID]).standardOutput.contains("revoked     clearedLocally  notRevokedAtServer"))
        #expect(try fixture.run(["accounts"]).standardOutput == "No accounts.\n")
        #expect(try fixture.run(["pending"]).standardOutput == "No pending revocations.\n")
        let noToken = try fixture.run(["token", "--account", "alice", "--audience", Self.apiA])
        #expect(noToken.exitCode == 1)
        #expect(noToken.standardError.contains("[interactionRequired]"))

        // Again: nothing to clear, exit 0, no warning.
        let again = try fixture.store.run(["clear", "--account", "alice", "--yes"])
        #expect(again.exitCode == 0)
        #expect(again.standardOutput == "Nothing to clear: no entries for this account.\n")
        #expect(again.standardError == "")
        for output in [cleared.result, again] {
            #expect(!output.standardError.contains(userID) && !output.standardError.contains(refreshToken))
        }
    }
}
