import Foundation
import Testing
import TestSupport

/// `tokenctl token`: audiences, --min-ttl, --force, --require-scope, against the real server.
extension SessionCommandTests {
    static let apiA = "https://api-a.example/"
    static let apiB = "https://api-b.example/"

    @Test("two audiences for one account: one refresh each, then both from the cache; the default stays cached")
    func tokenPerAudience() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000511.\(UUID().uuidString.prefix(8)).apple").exitCode == 0)
        let before = try fixture.refreshGrants()

        for audience in [Self.apiA, Self.apiB] {
            let first = try fixture.json(["token", "--account", "alice", "--audience", audience, "--reveal"])
            #expect(first.result.exitCode == 0, "\(first.result.standardError)")
            expectKeys(first.object, Self.tokenKeys.union(["accessToken"]))
            #expect(first.object["source"] as? String == "network")
            #expect(first.object["audience"] as? String == audience)
            #expect(first.object["expiresAt"] is String)
            let accessToken = try #require(first.object["accessToken"] as? String)
            let introspection = try fixture.server.introspect(accessToken)
            #expect(introspection.active && introspection.audience == audience)

            let second = try fixture.json(["token", "--account", "alice", "--audience", audience])
            #expect(second.result.exitCode == 0, "\(second.result.standardError)")
            #expect(second.object["source"] as? String == "cache")
            #expect(second.object["audience"] as? String == audience)
        }
        #expect(try fixture.refreshGrants() - before == 2)

        // The sign-in's token for the default API is still cached, and the text names its audience.
        let defaultAPI = try fixture.run(["token", "--account", "alice"])
        #expect(defaultAPI.exitCode == 0)
        #expect(defaultAPI.standardOutput.contains("audience  (default)\n"))
        #expect(defaultAPI.standardOutput.contains("source    cache\n"))
        let text = try fixture.run(["token", "--account", "alice", "--audience", Self.apiB])
        #expect(text.standardOutput.contains("audience  \(Self.apiB)\n"))
        #expect(text.standardOutput.contains("declined  -\n"))
        #expect(try fixture.refreshGrants() - before == 2)
    }

    @Test("--min-ttl above the server's token lifetime: exit 78 after exactly one refresh, then none")
    func minimumTTLTooLarge() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000522.\(UUID().uuidString.prefix(8)).apple").exitCode == 0)
        try fixture.server.configure(accessTokenTTL: 600)
        let before = try fixture.refreshGrants()

        for _ in 0..<2 {
            let result = try fixture.run(["token", "--account", "alice", "--audience", Self.apiA, "--min-ttl", "3600"])
            #expect(result.exitCode == 78, "\(result.standardError)")
            #expect(result.standardOutput == "")
            let lines = result.standardError.split(separator: "\n")
            #expect(lines.count == 2, "\(result.standardError)")
            #expect(lines.first?.hasPrefix("tokenctl: error: ") == true)
            #expect(lines.first?.hasSuffix("[minimumTTLTooLarge]") == true)
            let hint = "tokenctl: hint: minimumTTLTooLarge: the server's access tokens live 600 s; ask for a shorter --min-ttl"
            #expect(lines.last.map(String.init) == hint, "\(result.standardError)")
            #expect(try fixture.refreshGrants() - before == 1)
        }
        // JSON mode: nothing on stdout, the same status.
        let json = try fixture.store.run(
            ["--json", "token", "--account", "alice", "--audience", Self.apiA, "--min-ttl", "3600"],
            environment: fixture.environment)
        #expect(json.exitCode == 78)
        #expect(json.standardOutput == "")

        // The one refresh's token was kept: a reachable minimum TTL takes it from the cache.
        let cached = try fixture.json(["token", "--account", "alice", "--audience", Self.apiA, "--min-ttl", "300"])
        #expect(cached.result.exitCode == 0, "\(cached.result.standardError)")
        #expect(cached.object["source"] as? String == "cache")
        #expect(try fixture.refreshGrants() - before == 1)
    }

    @Test("--force: exactly one refresh although the cache holds a fresh token; the new token is cached")
    func forceRefresh() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000533.\(UUID().uuidString.prefix(8)).apple").exitCode == 0)
        let cachedToken = try #require(
            try fixture.json(["token", "--account", "alice", "--reveal"]).object["accessToken"] as? String)
        let before = try fixture.refreshGrants()

        let forced = try fixture.json(["token", "--account", "alice", "--force", "--reveal"])
        #expect(forced.result.exitCode == 0, "\(forced.result.standardError)")
        #expect(forced.object["source"] as? String == "network")
        let newToken = try #require(forced.object["accessToken"] as? String)
        #expect(newToken != cachedToken)
        #expect(try fixture.refreshGrants() - before == 1)

        let after = try fixture.json(["token", "--account", "alice", "--reveal"])
        #expect(after.object["source"] as? String == "cache")
        #expect(after.object["accessToken"] as? String == newToken)
        #expect(try fixture.refreshGrants() - before == 1)
    }

    @Test("declined scopes are reported; a declined --require-scope exits 1 with serverDeclinedScopes")
    func declinedAndRequiredScopes() throws {
        let fixture = try Fixture()
        let userID = "000544.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID, scopes: ["openid", "read:items", "write:items"]).exitCode == 0)
        try fixture.server.configure(declinedScopes: ["write:items"])

        let declined = try fixture.json(
            ["token", "--account", "alice", "--force", "--scope", "read:items", "--scope", "write:items"])
        #expect(declined.result.exitCode == 0, "\(declined.result.standardError)")
        #expect(declined.object["declinedScopes"] as? [String] == ["write:items"])
        let granted = declined.object["grantedScopes"] as? [String] ?? []
        #expect(granted.contains("read:items") && !granted.contains("write:items"), "\(granted)")

        let required = try fixture.run(
            ["token", "--account", "alice", "--force", "--scope", "read:items", "--require-scope", "write:items"])
        #expect(required.exitCode == 1, "\(required.standardError)")
        #expect(required.standardOutput == "")
        #expect(required.standardError.contains("declined: write:items"))
        #expect(required.standardError.contains("[serverDeclinedScopes]"))
        #expect(!required.standardError.contains(userID) && !required.standardError.contains("alice"))

        // A required scope that is granted: exit 0.
        let satisfied = try fixture.json(["token", "--account", "alice", "--require-scope", "read:items"])
        #expect(satisfied.result.exitCode == 0, "\(satisfied.result.standardError)")
    }
}
