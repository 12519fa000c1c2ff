import Foundation
import TestTraits
import Testing
import TestSupport

/// `login --browser --prompt P --login-hint H --max-age S --acr-values V` through the binary,
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
            ("--prompt", "login"), ("--login-hint", hint), ("--max-age", "60"), ("--acr-values", "urn:mfa"),
        ]
        for (option, value) in options {
            for method in [[], ["--device"]] {
                let result = try fixture.run(["login", "--account", "alice"] + method + [option, value])
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
        ]
        for (arguments, message) in bad {
            let result = try fixture.run(["login", "--browser", "--account", "alice"] + arguments)
            #expect(result.exitCode == 64, "\(arguments): \(result.standardError)")
            #expect(result.standardError.contains("tokenctl: error: \(message)"), "\(arguments): \(result.standardError)")
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.store.path))
        #expect(try fixture.server.stats().tokenRequests == 0)
    }

    @Test("--prompt login --login-hint --max-age --acr-values reach the server; the hinted user signs in; the hint not on stderr")
    func optionsReachTheServer() throws {
        let fixture = try Fixture()
        let hint = "000556.\(UUID().uuidString.prefix(8).lowercased()).hint"
        let login = try LoginCommandTests.browserLogin(
            fixture,
            ["--prompt", "login", "--login-hint", hint, "--max-age", "600", "--acr-values", "urn:tokenstore:test:mfa urn:b"])
        #expect(login.exitCode == 0, "\(login.standardError)")
        #expect(!login.standardError.contains(hint), "\(login.standardError)")
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
        let result = try LoginCommandTests.browserLogin(fixture, ["--prompt", "none", "--login-hint", hint])
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
