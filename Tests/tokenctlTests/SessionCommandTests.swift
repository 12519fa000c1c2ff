import Foundation
import TestTraits
import Testing
import TestSupport

/// login / token / logout / resume / pending / state / history through the binary, against
/// the real authorization server on loopback and the private keyring.
@Suite("tokenctl session commands", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SessionCommandTests {
    /// A store and a server; `--domain` / `--client-id` come from the environment variables.
    struct Fixture {
        let store: TokenctlStore
        let server: AuthorizationServer
        var environment: [String: String] {
            ["TOKENCTL_DOMAIN": server.baseURL.absoluteString, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID]
        }

        init() throws {
            store = try TokenctlStore()
            server = try AuthorizationServer()
        }

        func run(_ arguments: [String]) throws -> TokenctlResult {
            try store.run(arguments, environment: environment)
        }

        func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws
            -> (result: TokenctlResult, object: [String: Any])
        {
            try store.json(arguments, environment: environment, sourceLocation: sourceLocation)
        }

        func login(account: String, userID: String, scopes: [String] = ["openid", "read:items"]) throws -> TokenctlResult {
            let code = try server.appleAuthorizationCode(for: userID)
            return try store.run(
                ["login", "--account", account, "--apple-user-id", userID] + scopes.flatMap { ["--scope", $0] },
                stdin: code, environment: environment)
        }

        /// The refresh grants the server has answered so far.
        func refreshGrants() throws -> Int { try server.stats().refreshGrants }
    }

    /// The keys of `token --json` without `--reveal`.
    static let tokenKeys: Set<String> = [
        "account", "audience", "expiresAt", "grantedScopes", "scopes", "declinedScopes", "source", "tokenType",
    ]

    @Test("login → token → logout → state = revoked → history, text and JSON; no token without --reveal")
    func fullCycle() throws {
        let fixture = try Fixture()
        let userID = "000111.\(UUID().uuidString.prefix(8)).apple"

        // login with the options on the command line (not the environment).
        let code = try fixture.server.appleAuthorizationCode(for: userID)
        let login = try fixture.store.json(
            [
                "login", "--domain", fixture.server.baseURL.absoluteString, "--client-id",
                AuthorizationServer.publicClientID, "--account", "alice", "--apple-user-id", userID, "--scope", "read:items",
            ], stdin: code + "\n")
        #expect(login.result.exitCode == 0, "\(login.result.standardError)")
        expectKeys(login.object, ["account", "service", "state", "expiresAt", "scopes", "declinedScopes", "userID", "subject"])
        #expect(login.object["userID"] as? String == userID)
        #expect(login.object["state"] as? String == "authorized")
        #expect((login.object["scopes"] as? [String])?.contains("read:items") == true)
        #expect(try fixture.run(["state", userID]).standardOutput == "authorized\n")

        // token: cached after the sign-in; the token only with --reveal.
        let token = try fixture.json(["token", "--account", "alice"])
        #expect(token.result.exitCode == 0)
        expectKeys(token.object, Self.tokenKeys)
        #expect(token.object["source"] as? String == "cache")
        #expect(token.object["audience"] is NSNull)
        #expect(token.object["declinedScopes"] as? [String] == [])
        #expect(token.object["grantedScopes"] as? [String] == token.object["scopes"] as? [String])
        let revealed = try fixture.json(["token", "--account", "alice", "--reveal"])
        expectKeys(revealed.object, Self.tokenKeys.union(["accessToken"]))
        let accessToken = try #require(revealed.object["accessToken"] as? String)
        #expect(try fixture.server.introspect(accessToken).active)
        let tokenText = try fixture.run(["token", "--account", "alice"])
        #expect(tokenText.exitCode == 0)
        #expect(tokenText.standardOutput.contains("source    cache"))
        #expect(tokenText.standardOutput.contains("audience  (default)"))
        #expect(!tokenText.standardOutput.contains(accessToken))

        // The refresh token never shows in list or status.
        let refreshToken = try #require(
            try fixture.store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)
        for output in [try fixture.run(["list"]), try fixture.run(["status"]), try fixture.run(["pending"])] {
            #expect(output.exitCode == 0)
            #expect(!output.standardOutput.contains(refreshToken) && !output.standardOutput.contains(accessToken))
        }

        // logout revokes at the server.
        let logout = try fixture.json(["logout", "--account", "alice"])
        #expect(logout.result.exitCode == 0, "\(logout.result.standardError)")
        expectKeys(logout.object, ["account", "outcome", "failureCode", "pendingRevocations"])
        #expect(logout.object["outcome"] as? String == "revoked")
        #expect(logout.object["pendingRevocations"] as? Int == 0)
        #expect(try fixture.server.introspect(refreshToken).active == false)

        let state = try fixture.run(["state", userID])
        #expect(state.exitCode == 0)
        #expect(state.standardOutput == "revoked\n")
        let history = try fixture.run(["history", userID])
        #expect(history.exitCode == 0)
        let lines = history.standardOutput.split(separator: "\n")
        #expect(lines.count == 3, "\(history.standardOutput)")
        #expect(lines.first?.hasPrefix("DATE") == true)
        #expect(lines.dropFirst().first?.contains("notFound    authorized  signIn") == true, "\(history.standardOutput)")
        #expect(lines.last?.contains("authorized  revoked     userLogout") == true, "\(history.standardOutput)")
        let historyJSON = try fixture.json(["history", userID])
        expectKeys(historyJSON.object, ["state", "transitions"])
        let transitions = historyJSON.object["transitions"] as? [[String: Any]] ?? []
        #expect(transitions.map { $0["to"] as? String } == ["authorized", "revoked"])
        for transition in transitions { expectKeys(transition, ["date", "from", "to", "reason", "detail"]) }

        // A second logout finds nothing: notFound, exit 0; token now needs a sign-in (exit 1).
        let again = try fixture.run(["logout", "--account", "alice"])
        #expect(again.exitCode == 0)
        #expect(again.standardOutput.hasPrefix("notFound\n"))
        let noToken = try fixture.run(["token", "--account", "alice"])
        #expect(noToken.exitCode == 1)
        #expect(noToken.standardError.contains("[interactionRequired]"))
        #expect(noToken.standardError.contains("tokenctl: hint: sign in again with 'tokenctl login'"))
    }

    @Test("server down: login exits 69, logout 75 with the token in the outbox, resume --all 75, then 0 once it is back")
    func serverDown() throws {
        let fixture = try Fixture()
        let userID = "000222.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        let refreshToken = try #require(
            try fixture.store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)
        let spareCode = try fixture.server.appleAuthorizationCode(for: "000333.apple")

        fixture.server.stopTemporarily()
        let login = try fixture.store.run(
            ["login", "--account", "bob", "--apple-user-id", "000333.apple"], stdin: spareCode, environment: fixture.environment)
        #expect(login.exitCode == 69, "\(login.standardError)")
        #expect(login.standardError.contains("[notConnectedToInternet]"))

        let logout = try fixture.run(["logout", "--account", "alice"])
        #expect(logout.exitCode == 75, "\(logout.standardError)")
        #expect(logout.standardOutput.hasPrefix("revocationPending\n"))
        #expect(try fixture.run(["state", userID]).standardOutput == "revoked\n")

        let pending = try fixture.json(["pending"])
        #expect(pending.result.exitCode == 0)
        let entries = pending.object["entries"] as? [[String: Any]] ?? []
        #expect(entries.count == 1)
        if let entry = entries.first {
            expectKeys(entry, ["id", "service", "account", "reason", "attempts", "nextAttemptAt", "lastError", "failureCode", "createdAt"])
            #expect(entry["account"] as? String == "alice")
            #expect((entry["attempts"] as? Int ?? 0) >= 1)
            #expect((entry["lastError"] as? String)?.hasPrefix("notConnectedToInternet") == true)
        }
        let pendingText = try fixture.run(["pending"])
        #expect(pendingText.standardOutput.hasPrefix("ACCOUNT  ATTEMPTS  NEXT ATTEMPT"))
        for output in [logout, pending.result, pendingText] {
            #expect(!output.standardOutput.contains(refreshToken) && !output.standardError.contains(refreshToken))
        }

        // --all: the entry is retried although its next attempt may not be due yet.
        let stillDown = try fixture.json(["resume", "--all"])
        #expect(stillDown.result.exitCode == 75)
        expectKeys(stillDown.object, ["revoked", "stillPending", "failed", "notDue", "unreadable", "flagged", "remaining"])
        #expect(stillDown.object["stillPending"] as? Int == 1)

        try fixture.server.restart()
        #expect(try fixture.server.introspect(refreshToken).active)
        let resumed = try fixture.json(["resume", "--all"])
        #expect(resumed.result.exitCode == 0, "\(resumed.result.standardError)")
        #expect(resumed.object["revoked"] as? Int == 1)
        #expect(resumed.object["remaining"] as? Int == 0)
        #expect(try fixture.server.introspect(refreshToken).active == false)
        #expect(try fixture.run(["pending"]).standardOutput == "No pending revocations.\n")
        let history = try fixture.json(["history", userID])
        let reasons = (history.object["transitions"] as? [[String: Any]] ?? []).map { $0["reason"] as? String }
        #expect(reasons.last == "revocationConfirmed", "\(reasons)")
    }

    @Test("rate limited: token exits 75; a refused revocation exits 1 and stays flagged in pending")
    func rateLimitedAndRefused() throws {
        let fixture = try Fixture()
        let userID = "000444.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)

        // Asking for a scope not in the cache forces a refresh; the server answers 429 every time.
        try fixture.server.inject(.status(429, path: "/oauth/token", count: 10, retryAfter: "1"))
        let limited = try fixture.run(["token", "--account", "alice", "--scope", "write:items"])
        #expect(limited.exitCode == 75, "\(limited.standardError)")
        #expect(limited.standardError.contains("[rateLimited]"))
        try fixture.server.clearFaults()

        try fixture.server.inject(.status(401, path: "/oauth/revoke", body: #"{"error":"invalid_client"}"#))
        let refused = try fixture.json(["logout", "--account", "alice"])
        #expect(refused.result.exitCode == 1)
        #expect(refused.object["outcome"] as? String == "revocationFailed")
        #expect(refused.object["failureCode"] as? String == "invalidClient")
        let pending = try fixture.json(["pending"])
        let entries = pending.object["entries"] as? [[String: Any]] ?? []
        #expect(entries.first?["failureCode"] as? String == "invalidClient")
    }

    @Test("an http domain that is not loopback is a usage error (64)")
    func insecureDomain() throws {
        let store = try TokenctlStore()
        let result = try store.run([
            "token", "--domain", "http://auth.example.com", "--client-id", "c", "--account", "alice",
        ])
        #expect(result.exitCode == 64)
        #expect(result.standardError.contains("invalid value for '--domain <url>'"))
        #expect(result.standardError.contains("Usage: tokenctl token"))
    }
}
