@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// Choosing who signs in: `prompt`, `login_hint`, `max_age` and `acr_values` in the browser
/// sign-in, end to end against the test server (its browser session is a cookie the scripted
/// user agent keeps in a jar file, as a browser profile does) and the real keyring. What the
/// browser was sent is read back from the start page's redirect and from the server's record
/// of each `/authorize`.
@Suite("Sign-in prompt, login_hint, max_age, acr_values", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SignInPromptTests {
    /// The scripted user agent with a cookie jar in `directory` (the browser's session at the server).
    static func browser(cookies directory: TemporaryDirectory) -> SystemBrowserOpener {
        BrowserSignInTests.scriptedBrowser(environment: [
            "TOKENSTORE_USERAGENT_COOKIES": directory.appending("cookies.json").path
        ])
    }

    static func query(_ url: URL) -> [String: String] {
        Dictionary(
            (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { first, _ in first })
    }

    @Test("prompt, login_hint, max_age and acr_values reach the server; the hinted user signs in; the hint is in no log line")
    func parametersReachTheServer() async throws {
        let f = try SessionFixture()
        let logs = AuthorizationServerClientTests.LogSink()
        let session = try SessionFixture.makeSession(store: f.store, server: f.server)
        let logged = TokenSession(store: f.store, client: session.client, logger: logs.logger)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let hint = "000792.hinted.\(UUID().uuidString.prefix(8).lowercased())"
        let asked = ["urn:tokenstore:test:mfa", "urn:tokenstore:test:password"]
        let followed = URLBox()
        let result = try await logged.signIn(
            account: "alice", redirectURIs: redirect, prompt: .login, loginHint: hint, maxAge: .seconds(600),
            acrValues: asked, browser: StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: followed))
        let query = Self.query(try #require(followed.value))
        #expect(query["prompt"] == "login")
        #expect(query["login_hint"] == hint)
        #expect(query["max_age"] == "600")
        #expect(query["acr_values"] == asked.joined(separator: " "))
        let record = try #require(try f.server.authorizations().last)
        #expect(
            record == AuthorizationServer.AuthorizationRecord(
                prompt: "login", loginHint: hint, maxAge: "600", acrValues: asked.joined(separator: " "), loginForm: true))
        // The server pre-filled the hinted identity, and that user signed in.
        #expect(result.profile.userID == hint)
        #expect(try f.store.credentialState(forUserID: hint) == .authorized)
        #expect(!logs.lines.isEmpty)
        #expect(logs.lines.allSatisfy { !$0.contains(hint) }, "\(logs.lines)")
    }

    @Test("without PAR the browser's command line (its /proc cmdline) holds neither login_hint nor the hint")
    func loginHintNotInBrowserArgv() async throws {
        let f = try SessionFixture()
        let directory = try TemporaryDirectory(prefix: "signin-hint-argv")
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let (browser, record) = try BrowserSignInLocalUserTests.recordingBrowser(directory)
        let hint = "000792.argv.hint.\(UUID().uuidString.prefix(8).lowercased())"
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, prompt: .login, loginHint: hint, browser: browser)
        #expect(result.profile.userID == hint, "the hint reached the server through the start page's redirect")
        #expect(try f.server.authorizations().last?.loginHint == hint)
        let argv = try String(contentsOf: record, encoding: .utf8)
        #expect(argv.contains("http://127.0.0.1:\(redirect[0].port!)/start/"), "\(argv)")
        for text in [hint, "login_hint", "prompt=", "?"] {
            #expect(!argv.contains(text), "the browser's argv holds \(text)")
        }
    }

    @Test("with PAR the login_hint is pushed: the browser's URL has only client_id and request_uri")
    func loginHintIsPushed() async throws {
        let f = try SessionFixture()
        try f.server.configurePAR(enabled: true)
        let session = try PARSignInTests.session(f)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let hint = "000792.pushed.hint.0638"
        let followed = URLBox()
        let result = try await session.signIn(
            account: "alice", redirectURIs: redirect, prompt: .selectAccount, loginHint: hint,
            browser: StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: followed))
        let url = try #require(followed.value)
        #expect(Set(Self.query(url).keys) == ["client_id", "request_uri"], "\(url)")
        #expect(!url.absoluteString.contains("pushed.hint"))
        #expect(try PARSignInTests.lastAuthorize(f) == ["client_id", "request_uri"])
        #expect(try f.server.authorizations().last?.loginHint == hint)
        #expect(try f.server.authorizations().last?.prompt == "select_account")
        #expect(result.profile.userID == hint)
    }

    @Test("prompt none without a browser session: interactionRequired (login_required), nothing stored, the hint not in the error")
    func promptNoneWithoutSession() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let hint = "000792.none.hint.0638"
        do {
            try await f.session.signIn(
                account: "alice", redirectURIs: redirect, prompt: SignInPrompt.none, loginHint: hint,
                browser: BrowserSignInTests.scriptedBrowser())
            Issue.record("prompt=none without a session signed in")
        } catch let error as AuthSessionError {
            #expect(error.code == .interactionRequired, "\(error)")
            #expect(error.oauthError == "login_required")
            #expect(!"\(error)".contains(hint) && !error.message.contains(hint))
        }
        try BrowserSignInTests.expectNothingStored(f, userID: hint)
        #expect(try f.server.stats().codeGrants == 0)
        #expect(BrowserSignInTests.isFree(UInt16(redirect[0].port!)))
        // The server's other answers that ask for the user are interactionRequired too.
        for error in ["interaction_required", "consent_required", "account_selection_required"] {
            try f.server.armBadRedirect(.oauthError(error))
            await #expect(throws: AuthSessionError.interactionRequired) {
                _ = try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
            }
        }
    }

    @Test("a browser session answers without a page (prompt none too); prompt login shows the login page over it; max_age")
    func browserSessionAndPromptLogin() async throws {
        let f = try SessionFixture()
        let jar = try TemporaryDirectory()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let user = "000792.session.user.0638"
        @discardableResult
        func signIn(prompt: SignInPrompt? = nil, maxAge: Duration? = nil) async throws -> SignInResult {
            try f.server.setNextAppleUser(user)  // who signs in when the login page is shown
            return try await f.session.signIn(
                account: "alice", redirectURIs: redirect, prompt: prompt, maxAge: maxAge, browser: Self.browser(cookies: jar))
        }
        try await signIn()
        #expect(try f.server.authorizations().last?.loginForm == true)
        #expect(try f.server.browserSessionCount() == 1)
        // The session answers: no page.
        #expect(try await signIn().profile.userID == user)
        #expect(try f.server.authorizations().last?.loginForm == false)
        #expect(try await signIn(prompt: SignInPrompt.none).profile.userID == user)
        #expect(try f.server.authorizations().last?.loginForm == false)
        #expect(try f.server.counter("silent_authorizations") == 2)
        // prompt=login: the login page again, without a logout.
        try await signIn(prompt: .login)
        #expect(try f.server.authorizations().last?.loginForm == true)
        #expect(try f.server.counter("silent_authorizations") == 2)
        // max_age: a session older than it needs a login (a fresh auth_time, which passes the check) ...
        try f.server.ageBrowserSessions(by: 1000)
        try await signIn(maxAge: .seconds(60))
        #expect(try f.server.authorizations().last?.loginForm == true)
        // ... and one young enough answers with its own (old) auth_time, within max_age.
        try f.server.ageBrowserSessions(by: 1000)
        try await signIn(maxAge: .seconds(100_000))
        #expect(try f.server.authorizations().last?.loginForm == false)
        #expect(try f.store.credentialState(forUserID: user) == .authorized)
        #expect(try f.server.stats().codeGrants == 6)
    }

    @Test("acr_values: the server's acr among them is stored; an acr not asked for is idTokenInvalid, nothing stored")
    func acrValues() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let user = "000792.acr.user.0638"
        try f.server.setSupportedACR(["urn:example:password"])
        try f.server.setNextAppleUser(user)
        do {
            try await f.session.signIn(
                account: "alice", redirectURIs: redirect, acrValues: ["urn:example:mfa"], browser: BrowserSignInTests.scriptedBrowser())
            Issue.record("an acr that was not asked for was accepted")
        } catch let error as AuthSessionError {
            #expect(error.code == .idTokenInvalid && error.idTokenCheck == .authenticationContext, "\(error)")
            #expect(error.message.contains("authenticationContext"), "\(error.message)")
        }
        try BrowserSignInTests.expectNothingStored(f, userID: user)
        #expect(try f.server.stats().revocations == 1, "the refused sign-in's refresh token is revoked")
        try f.server.setNextAppleUser(user)
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, acrValues: ["urn:example:mfa", "urn:example:password"],
            browser: BrowserSignInTests.scriptedBrowser())
        #expect(result.profile.userID == user)
    }

    @Test("bad values are invalidRequest before any browser or request; the hint is never in the error")
    func badValuesRefused() async throws {
        let f = try SessionFixture()
        let redirect = [URL(string: "http://127.0.0.1:53180/callback")!]
        let opener = RecordingOpener()
        let hint = "secret.hint\u{7}value"
        let cases: [(String?, Duration?, [String])] = [
            (nil, .seconds(-1), []), ("", nil, []), (hint, nil, []), (nil, nil, ["urn:a urn:b"]), (nil, nil, [""]),
        ]
        for (loginHint, maxAge, acr) in cases {
            do {
                try await f.session.signIn(
                    account: "alice", redirectURIs: redirect, loginHint: loginHint, maxAge: maxAge, acrValues: acr,
                    browser: opener)
                Issue.record("accepted \(String(describing: maxAge)) \(acr)")
            } catch let error as AuthSessionError {
                #expect(error.code == .invalidRequest, "\(error)")
                #expect(!"\(error)".contains("secret.hint"))
            }
        }
        #expect(opener.urls.isEmpty)
        #expect(try f.server.stats().tokenRequests == 0)
    }
}
