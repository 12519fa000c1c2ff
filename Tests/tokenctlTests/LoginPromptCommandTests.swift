import Foundation
import TestTraits
import Testing
import TestSupport

/// `login --browser --prompt P --login-hint H | --login-hint-fd N --max-age S --acr-values V` through the binary,
/// against the real authorization server on loopback (the scripted user agent as `$BROWSER`)
/// and the private keyring.
@Suite("tokenctl login --prompt, --login-hint, --max-age, --acr-values", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LoginPromptCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    @Test("the four options only with --browser (64); a bad --prompt, --max-age or --acr-values is 64; the hint never echoed")
    func usageErrors() throws {
        let fixture = try Fixture()
        let hint = "jane.hint@example.com"
        let options: [(String, String)] = [
            ("--prompt", "login"), ("--login-hint", hint), ("--login-hint-fd", "0"), ("--max-age", "60"),
            ("--acr-values", "urn:mfa"),
        ]
        for (option, value) in options {
            for method in [[], ["--device"]] {
                let result = try fixture.store.run(
                    ["login", "--account", "alice"] + method + [option, value], stdin: hint, environment: fixture.environment)
                #expect(result.exitCode == 64, "\(method) \(option): \(result.standardError)")
                #expect(
                    result.standardError.contains("tokenctl: error: '\(option)' can only be used with '--browser'"),
                    "\(result.standardError)")
                #expect(!result.standardError.contains(hint))
            }
        }
        let bad: [([String], String)] = [
            (["--prompt", "sometimes"], "invalid value for '--prompt <prompt>': expected one of login, select_account, consent, none"),
            (["--prompt", "none login"], "invalid value for '--prompt <prompt>'"),
            (["--max-age", "-1"], "invalid value for '--max-age <seconds>': must be ≥ 0"),
            (["--max-age", "soon"], "invalid value for '--max-age <seconds>': expected a non-negative integer"),
            (["--max-age", "99999999999"], "invalid value for '--max-age <seconds>'"),
            (["--acr-values", "  "], "invalid value for '--acr-values <values>': expected space-separated acr values"),
            (["--login-hint", ""], "missing value for '--login-hint <identifier>'"),
            (["--login-hint-fd", "x"], "invalid value for '--login-hint-fd <fd>': expected a non-negative integer"),
            (["--login-hint", hint, "--login-hint-fd", "0"], "'--login-hint' and '--login-hint-fd' cannot be used together"),
            (["--login-hint-fd", "250"], "cannot read the login hint from file descriptor 250: Bad file descriptor"),
            (["--login-hint-fd", "0"], "the login hint read from file descriptor 0 is empty"),
        ]
        for (arguments, message) in bad {
            let result = try fixture.store.run(
                ["login", "--browser", "--account", "alice"] + arguments, stdin: "", environment: fixture.environment)
            #expect(result.exitCode == 64, "\(arguments): \(result.standardError)")
            #expect(result.standardError.contains("tokenctl: error: \(message)"), "\(arguments): \(result.standardError)")
            #expect(!result.standardError.contains(hint))
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.store.path))
        #expect(try fixture.server.stats().tokenRequests == 0)
    }

    @Test("--prompt login --login-hint-fd --max-age --acr-values reach the server; the hinted user signs in; the hint in no argv nor on stderr")
    func optionsReachTheServer() throws {
        let fixture = try Fixture()
        let hint = "000556.\(UUID().uuidString.prefix(8).lowercased()).hint"
        // $BROWSER records its own /proc/PID/cmdline (what every local user can read), then browses.
        let directory = try TemporaryDirectory(prefix: "login-hint-argv")
        let argvFile = directory.appending("argv")
        let script = try Self.script(
            in: directory,
            """
            tr '\\0' '\\n' < /proc/$$/cmdline > '\(argvFile.path)'
            exec /usr/bin/python3 '\(AuthorizationServer.userAgentScript.path)' "$@"

            """)
        var browser = LoginCommandTests.scriptedBrowser
        browser["BROWSER"] = script
        let arguments = ["--prompt", "login", "--login-hint-fd", "0", "--max-age", "600", "--acr-values", "urn:tokenstore:test:mfa urn:b"]
        let login = try LoginCommandTests.browserLogin(fixture, arguments, browser: browser, stdin: hint + "\n")
        #expect(login.exitCode == 0, "\(login.standardError)")
        #expect(!login.standardError.contains(hint), "\(login.standardError)")
        let argv = try String(contentsOf: argvFile, encoding: .utf8)
        #expect(argv.contains("http://127.0.0.1:") && argv.contains("/start/"), "\(argv)")
        #expect(!argv.contains(hint) && !argv.contains("login_hint"), "\(argv)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(login.standardOutput.utf8)) as? [String: Any])
        #expect(object["userID"] as? String == hint)
        let record = try #require(try fixture.server.authorizations().last)
        #expect(
            record == AuthorizationServer.AuthorizationRecord(
                prompt: "login", loginHint: hint, maxAge: "600", acrValues: "urn:tokenstore:test:mfa urn:b", loginForm: true))
    }

    @Test("--prompt none without a session at the server: exit 1, interactionRequired (login_required), the hint; nothing stored")
    func promptNone() throws {
        let fixture = try Fixture()
        let hint = "000557.none.hint"
        let result = try LoginCommandTests.browserLogin(fixture, ["--prompt", "none", "--login-hint-fd", "0"], stdin: hint)
        #expect(result.exitCode == 1, "\(result.standardError)")
        #expect(result.standardError.contains("(login_required) [interactionRequired]"), "\(result.standardError)")
        #expect(
            result.standardError.contains(
                "tokenctl: hint: interactionRequired: the server must show the user a page; run 'tokenctl login --browser' "
                    + "without --prompt none"), "\(result.standardError)")
        #expect(!result.standardError.contains(hint) && result.standardOutput.isEmpty)
        try LoginCommandTests.expectNoItems(fixture)
        #expect(try fixture.server.stats().codeGrants == 0)
    }

    @Test("--login-hint H (the issue's spelling, visible in the process list) still reaches the server")
    func loginHintArgument() throws {
        let fixture = try Fixture()
        let hint = "000558.argument.hint"
        let login = try LoginCommandTests.browserLogin(fixture, ["--prompt", "select_account", "--login-hint", hint])
        #expect(login.exitCode == 0, "\(login.standardError)")
        #expect(!login.standardError.contains(hint), "\(login.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(login.standardOutput.utf8)) as? [String: Any])
        #expect(object["userID"] as? String == hint)
        #expect(try fixture.server.authorizations().last?.loginHint == hint)
        #expect(try fixture.server.authorizations().last?.prompt == "select_account")
    }

    /// `$BROWSER` running the shell script `body`, written to `browser.sh` in `directory`. Run by
    /// `/bin/sh`, not executed itself: a child another test spawns meanwhile may inherit the
    /// descriptor it was written through, and executing it would then fail with ETXTBSY.
    static func script(in directory: TemporaryDirectory, _ body: String) throws -> String {
        let url = directory.appending("browser.sh")
        try body.write(to: url, atomically: true, encoding: .utf8)
        return "/bin/sh '\(url.path)'"
    }

    @Test("an acr not asked for, an ID token without auth_time under --max-age: exit 65, idTokenInvalid, nothing stored")
    func idTokenChecks() throws {
        let fixture = try Fixture()
        try fixture.server.setSupportedACR(["urn:example:password"])
        let acr = try LoginCommandTests.browserLogin(fixture, ["--acr-values", "urn:example:mfa"])
        #expect(acr.exitCode == 65, "\(acr.standardError)")
        #expect(acr.standardError.contains("ID token failed the authenticationContext check"), "\(acr.standardError)")
        #expect(acr.standardError.contains("[idTokenInvalid]"))
        try LoginCommandTests.expectNoItems(fixture)

        try fixture.server.armBadIDToken(.missingAuthTime)
        let maxAge = try LoginCommandTests.browserLogin(fixture, ["--max-age", "3600"])
        #expect(maxAge.exitCode == 65, "\(maxAge.standardError)")
        #expect(maxAge.standardError.contains("authenticationTime"), "\(maxAge.standardError)")
        try LoginCommandTests.expectNoItems(fixture)

        // Asked for one the server meets: signed in.
        let good = try LoginCommandTests.browserLogin(fixture, ["--acr-values", "urn:example:mfa urn:example:password"])
        #expect(good.exitCode == 0, "\(good.standardError)")
    }
}
