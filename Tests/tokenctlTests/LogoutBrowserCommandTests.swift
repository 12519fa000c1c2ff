import Foundation
import TestTraits
import Testing
import TestSupport

/// `logout --browser` through the binary, against the real authorization server on loopback
/// (the scripted user agent as `$BROWSER`, keeping the server's session cookie in a jar file as
/// a browser profile does) and the private keyring.
@Suite("tokenctl logout --browser", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LogoutBrowserCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    @Test("login twice (the server's session answers the second), logout --browser ends it: the next login shows the page")
    func endsTheBrowserSession() throws {
        let fixture = try Fixture()
        let jar = try TemporaryDirectory()
        var browser = LoginCommandTests.scriptedBrowser
        browser["TOKENSTORE_USERAGENT_COOKIES"] = jar.appending("cookies.json").path
        let environment = fixture.environment.merging(browser) { _, given in given }
        let port = try LoginCommandTests.registeredPort(fixture.server)
        func login() throws -> Bool {
            let result = try fixture.store.run(
                ["--json", "login", "--browser", "--account", "alice", "--redirect-port", port], environment: environment)
            #expect(result.exitCode == 0, "\(result.standardError)")
            return try #require(try fixture.server.authorizations().last).loginForm
        }
        #expect(try login())
        #expect(try login() == false, "the server's session signed alice in without a page")

        let logout = try fixture.store.run(
            ["--json", "logout", "--account", "alice", "--browser", "--redirect-port", port, "--timeout", "60"],
            environment: environment)
        #expect(logout.exitCode == 0, "\(logout.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(logout.standardOutput.utf8)) as? [String: Any])
        #expect(object["outcome"] as? String == "revoked")
        #expect(object["browserSession"] as? String == "ended", "\(object)")
        #expect(object["browserSessionFailureCode"] == nil)
        #expect(try fixture.server.endSessions().last?.ended == true)
        #expect(try fixture.server.browserSessionCount() == 0)
        #expect(try login(), "the login page after logout --browser")

        // Text output; a plain logout has no browser-session key.
        let text = try fixture.store.run(
            ["logout", "--account", "alice", "--browser", "--redirect-port", port], environment: environment)
        #expect(text.exitCode == 0, "\(text.standardError)")
        #expect(text.standardOutput.hasPrefix("revoked\n"), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("browser session ended at the server"), "\(text.standardOutput)")
        // The one-time start address on stderr, as login prints its own; never the ID token.
        #expect(
            text.standardError.contains("tokenctl: open this URL to end the browser session: http://127.0.0.1:\(port)/start/"),
            "\(text.standardError)")
        #expect(!text.standardError.contains("id_token_hint") && !text.standardError.contains("eyJ"), "\(text.standardError)")
        let plain = try fixture.json(["logout", "--account", "alice"])
        #expect(plain.object["outcome"] as? String == "notFound")
        #expect(plain.object["browserSession"] == nil)
    }

    @Test("--redirect-port or --timeout without --browser: 64, nothing logged out")
    func usage() throws {
        let fixture = try Fixture()
        for arguments in [["--redirect-port", "53180"], ["--timeout", "5"]] {
            let result = try fixture.run(["logout", "--account", "alice"] + arguments)
            #expect(result.exitCode == 64, "\(result.standardError)")
            #expect(
                result.standardError.contains("tokenctl: error: '\(arguments[0])' can only be used with '--browser'"),
                "\(result.standardError)")
        }
        #expect(try fixture.server.stats().revokeRequests == 0)
    }
}
