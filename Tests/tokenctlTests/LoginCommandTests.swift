import Foundation
import TestTraits
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `login --browser` (the scripted user agent as `$BROWSER`), `login` with the Apple code on
/// stdin, the refused `--apple-code`, and `profile`, through the binary against the real
/// authorization server on loopback and the private keyring.
@Suite("tokenctl login (browser, Apple code on stdin) and profile", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LoginCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    /// The scripted user agent as `$BROWSER`, returning at once like xdg-open.
    static let scriptedBrowser = [
        "BROWSER": "/usr/bin/python3 '\(AuthorizationServer.userAgentScript.path)'", "TOKENSTORE_USERAGENT_DETACH": "1",
    ]

    /// A port nothing listens on now, registered at the server as `http://127.0.0.1:PORT/callback`.
    static func registeredPort(_ server: AuthorizationServer) throws -> String {
        let port = String(try LoopbackPorts.free(1)[0])
        try server.registerRedirectURIs(["http://127.0.0.1:\(port)/callback"])
        return port
    }

    /// `login --browser` on a fresh registered port with the scripted browser.
    static func browserLogin(
        _ fixture: Fixture, account: String = "alice", _ extra: [String] = [], browser: [String: String] = scriptedBrowser,
        stdin: String? = nil
    ) throws -> TokenctlResult {
        let port = try registeredPort(fixture.server)
        return try fixture.store.run(
            ["--json", "login", "--browser", "--account", account, "--redirect-port", port] + extra, stdin: stdin,
            environment: fixture.environment.merging(browser) { _, given in given })
    }

    /// The store holds no item (it may exist: `login` creates it before the sign-in).
    static func expectNoItems(_ fixture: Fixture, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let list = try fixture.json(["list"], sourceLocation: sourceLocation)
        #expect(list.result.exitCode == 0, sourceLocation: sourceLocation)
        #expect(list.object["count"] as? Int == 0, "\(list.result.standardOutput)", sourceLocation: sourceLocation)
    }

    @Test("login --browser signs in through $BROWSER; the URL is on stderr; profile shows user id, sub, name, email")
    func browserLoginAndProfile() throws {
        let fixture = try Fixture()
        let user = "000555.\(UUID().uuidString.prefix(8).lowercased()).0638"
        try fixture.server.setNextAppleUser(user, name: "Jane Appleseed", email: "jane@privaterelay.appleid.com", firstSignIn: true)

        let login = try Self.browserLogin(fixture, ["--scope", "openid profile email read:items", "--timeout", "60"])
        #expect(login.exitCode == 0, "\(login.standardError)")
        // Since trial 2 the note that a new store was made comes first (the fixture's store is new).
        let notes = login.standardError.split(separator: "\n").filter { $0.hasPrefix("tokenctl: note: ") }
        #expect(notes.count == 1 && notes[0].contains("so a new one was made"), "\(login.standardError)")
        let lines = login.standardError.split(separator: "\n").filter { !$0.hasPrefix("tokenctl: note: ") }
        #expect(lines.count == 1, "\(login.standardError)")  // --json: no waiting note, only the URL
        #expect(lines.first?.hasPrefix("tokenctl: open this URL to sign in: http://127.0.0.1:") == true)
        // The one-time start address, not the authorization URL (its state stays off screens and argv).
        #expect(lines.first?.contains("/start/") == true)
        #expect(lines.first?.contains("state=") == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(login.standardOutput.utf8)) as? [String: Any])
        expectKeys(object, ["account", "service", "state", "expiresAt", "scopes", "declinedScopes", "userID", "subject"])
        #expect(object["userID"] as? String == user)
        #expect(object["subject"] as? String == "apple|" + user)
        #expect((object["scopes"] as? [String])?.contains("read:items") == true)
        #expect(try fixture.server.stats().codeGrants == 1)
        #expect(try fixture.run(["state", user]).standardOutput == "authorized\n")

        let profile = try fixture.json(["profile", "--account", "alice"])
        #expect(profile.result.exitCode == 0, "\(profile.result.standardError)")
        expectKeys(profile.object, ["userID", "subject", "name", "email"])
        #expect(profile.object["userID"] as? String == user)
        #expect(profile.object["subject"] as? String == "apple|" + user)
        #expect(profile.object["name"] as? String == "Jane Appleseed")
        #expect(profile.object["email"] as? String == "jane@privaterelay.appleid.com")
        let text = try fixture.run(["profile", "--account", "alice"])
        #expect(text.exitCode == 0)
        #expect(text.standardOutput.contains("user id  \(user)\n"), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("name     Jane Appleseed\n"), "\(text.standardOutput)")

        // Text output of a second sign-in: the user id row and, on stderr, the waiting note.
        try fixture.server.setNextAppleUser(user)
        let port = try Self.registeredPort(fixture.server)
        let again = try fixture.store.run(
            ["login", "--browser", "--account", "alice", "--redirect-port", port],
            environment: fixture.environment.merging(Self.scriptedBrowser) { _, given in given })
        #expect(again.exitCode == 0, "\(again.standardError)")
        #expect(again.standardOutput.contains("user id               \(user)\n"), "\(again.standardOutput)")
        #expect(again.standardError.contains("tokenctl: waiting up to 300 s for the browser\n"))
        // The stored name survives a sign-in whose ID token no longer carries it.
        #expect(try fixture.json(["profile", "--account", "alice"]).object["name"] as? String == "Jane Appleseed")
    }

    @Test("--apple-code on the command line is refused (64) with the stdin hint; nothing is sent or stored")
    func appleCodeArgumentRefused() throws {
        let fixture = try Fixture()
        let code = try fixture.server.appleAuthorizationCode(for: "000666.refused.apple")
        for arguments in [["--apple-code", code], ["--apple-code=\(code)"]] {
            let result = try fixture.run(["login", "--account", "alice"] + arguments)
            #expect(result.exitCode == 64)
            #expect(result.standardError.hasPrefix("tokenctl: error: '--apple-code' is refused: "), "\(result.standardError)")
            #expect(result.standardError.contains(
                "tokenctl: hint: read from standard input: printf '%s' \"$CODE\" | tokenctl login --account A\n"))
            #expect(!result.standardError.contains(code) && result.standardOutput.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.store.path))
        #expect(try fixture.server.stats().tokenRequests == 0)
        // Not shown in help.
        #expect(!(try TokenctlBinary.run(["help", "login"]).standardOutput.contains("--apple-code")))
    }

    @Test("login reads the Apple code from stdin; the user id comes from the ID token; --first-name/--last-name reach the profile")
    func appleCodeOnStandardInput() throws {
        let fixture = try Fixture()
        let user = "000777.\(UUID().uuidString.prefix(8).lowercased()).apple"

        // An empty stdin is a data error, with the hint.
        let empty = try fixture.store.run(["login", "--account", "alice"], stdin: "", environment: fixture.environment)
        #expect(empty.exitCode == 65)
        #expect(empty.standardError.hasPrefix("tokenctl: error: the Apple authorization code read from stdin is empty\n"))

        // A mismatching --apple-user-id: the ID token's subject check fails (65), nothing stored.
        // (Another user: the server counts the refused exchange as that user's first sign-in.)
        let other = "000778.\(UUID().uuidString.prefix(8).lowercased()).apple"
        let wrongCode = try fixture.server.appleAuthorizationCode(for: other)
        let mismatch = try fixture.store.run(
            ["login", "--account", "alice", "--apple-user-id", "000000.someone.else"], stdin: wrongCode + "\n",
            environment: fixture.environment)
        #expect(mismatch.exitCode == 65, "\(mismatch.standardError)")
        #expect(mismatch.standardError.contains("[idTokenInvalid]"))
        #expect(!mismatch.standardError.contains(other) && !mismatch.standardError.contains(wrongCode))
        try Self.expectNoItems(fixture)

        let code = try fixture.server.appleAuthorizationCode(for: user)
        let login = try fixture.store.json(
            ["login", "--account", "alice", "--first-name", "Ada", "--last-name", "Lovelace", "--scope", "openid profile"],
            stdin: code + "\n", environment: fixture.environment)
        #expect(login.result.exitCode == 0, "\(login.result.standardError)")
        #expect(login.object["userID"] as? String == user)
        #expect(login.object["subject"] as? String == "apple|" + user)
        #expect(!login.result.standardError.contains(code))
        let profile = try fixture.json(["profile", "--account", "alice"])
        #expect(profile.object["name"] as? String == "Ada Lovelace")
        #expect(profile.object["email"] is NSNull)

        // With a matching --apple-user-id it works as well.
        let second = try fixture.store.run(
            ["login", "--account", "alice", "--apple-user-id", user], stdin: try fixture.server.appleAuthorizationCode(for: user),
            environment: fixture.environment)
        #expect(second.exitCode == 0, "\(second.standardError)")
    }

    @Test("login --browser: a bad ID token exits 65 and stores nothing; access_denied exits 75")
    func browserLoginRefusals() throws {
        let fixture = try Fixture()
        try fixture.server.armBadIDToken(.wrongAudience)
        let bad = try Self.browserLogin(fixture)
        #expect(bad.exitCode == 65, "\(bad.standardError)")
        #expect(bad.standardError.contains("[idTokenInvalid]"))
        #expect(bad.standardError.contains("tokenctl: hint: idTokenInvalid: nothing was stored"))
        #expect(bad.standardOutput.isEmpty)
        try Self.expectNoItems(fixture)

        try fixture.server.armBadRedirect(.accessDenied())
        let denied = try Self.browserLogin(fixture)
        #expect(denied.exitCode == 75, "\(denied.standardError)")
        #expect(denied.standardError.contains("(access_denied) [authorizationFailed]"), "\(denied.standardError)")
        #expect(denied.standardError.contains("tokenctl: hint: authorizationFailed: "))
        try Self.expectNoItems(fixture)
    }

    @Test("login --browser --timeout 2 with a browser that does nothing exits 75 after about 2 s")
    func browserLoginTimesOut() throws {
        let fixture = try Fixture()
        let started = ContinuousClock.now
        let result = try Self.browserLogin(fixture, ["--timeout", "2"], browser: ["BROWSER": "/bin/true"])
        let elapsed = ContinuousClock.now - started
        #expect(result.exitCode == 75, "\(result.standardError)")
        #expect(result.standardError.contains("[timedOut]"))
        #expect(result.standardError.contains("tokenctl: hint: timedOut: the browser did not come back within 2 s"))
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(30), "\(elapsed)")
        try Self.expectNoItems(fixture)
    }

    @Test("login as another user than the account's: refused (77, nothing stored) unless --allow-user-change, which says so")
    func userChange() throws {
        let fixture = try Fixture()
        let first = "000881.\(UUID().uuidString.prefix(8).lowercased()).0638"
        let second = "000882.\(UUID().uuidString.prefix(8).lowercased()).0638"
        try fixture.server.setNextAppleUser(first)
        #expect(try Self.browserLogin(fixture).exitCode == 0)

        // Browser form, another user: refused with the reason and the flag to use.
        try fixture.server.setNextAppleUser(second)
        let refused = try Self.browserLogin(fixture)
        #expect(refused.exitCode == 77, "\(refused.standardError)")
        #expect(refused.standardError.contains("[userChanged]"), "\(refused.standardError)")
        #expect(refused.standardError.contains("--allow-user-change"), "\(refused.standardError)")
        #expect(!refused.standardError.contains(second) && !refused.standardError.contains(first))
        #expect(try fixture.json(["profile", "--account", "alice"]).object["userID"] as? String == first)

        // Code form, another user: refused the same way.
        let code = try fixture.store.run(
            ["login", "--account", "alice"], stdin: try fixture.server.appleAuthorizationCode(for: second) + "\n",
            environment: fixture.environment)
        #expect(code.exitCode == 77, "\(code.standardError)")
        #expect(code.standardError.contains("[userChanged]"))

        // Allowed: the output names the change (JSON: previousUserID; text: a "user changed" row).
        try fixture.server.setNextAppleUser(second)
        let allowed = try Self.browserLogin(fixture, ["--allow-user-change"])
        #expect(allowed.exitCode == 0, "\(allowed.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(allowed.standardOutput.utf8)) as? [String: Any])
        #expect(object["userID"] as? String == second)
        #expect(object["previousUserID"] as? String == first)
        let text = try fixture.store.run(
            ["login", "--account", "alice", "--allow-user-change"],
            stdin: try fixture.server.appleAuthorizationCode(for: first) + "\n", environment: fixture.environment)
        #expect(text.exitCode == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("user changed          from \(second)\n"), "\(text.standardOutput)")
        // The same user again, allowed or not: no change reported.
        let same = try fixture.store.json(
            ["login", "--account", "alice"], stdin: try fixture.server.appleAuthorizationCode(for: first) + "\n",
            environment: fixture.environment)
        #expect(same.result.exitCode == 0, "\(same.result.standardError)")
        #expect(same.object["previousUserID"] == nil)
    }

    @Test("profile: an account without a profile exits 1 (not found), a missing store 66")
    func profileNotFound() throws {
        let fixture = try Fixture()
        let noStore = try fixture.run(["profile", "--account", "alice"])
        #expect(noStore.exitCode == 66)  // EX_NOINPUT since issue 24 (was 1)
        #expect(noStore.standardError.hasPrefix("tokenctl: error: no store at the given path\n"))

        try fixture.store.put("not a profile", account: "alice")
        for account in ["alice", "nobody"] {
            let result = try fixture.run(["profile", "--account", account])
            #expect(result.exitCode == 1)
            #expect(result.standardError.hasPrefix("tokenctl: error: no profile for this account and service\n"))
            #expect(!result.standardError.contains(account) && result.standardOutput.isEmpty)
        }
    }
}
