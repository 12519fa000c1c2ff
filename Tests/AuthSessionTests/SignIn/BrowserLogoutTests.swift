@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// `logout(account:endBrowserSession:…)` end to end against the test server (its browser
/// session is a cookie the scripted user agent keeps in a jar file, as a browser profile does)
/// and the real keyring: after it, a sign-in shows the login page again.
@Suite("Logout that ends the browser session at the provider", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BrowserLogoutTests {
    /// Signs `account` in through `browser`; whether the server showed its login page.
    static func signIn(
        _ session: TokenSession, _ f: SessionFixture, redirect: [URL], browser: SystemBrowserOpener,
        account: AccountID = "alice"
    ) async throws -> Bool {
        try await session.signIn(account: account, redirectURIs: redirect, browser: browser)
        return try #require(try f.server.authorizations().last).loginForm
    }

    @Test("OIDC: end_session_endpoint with id_token_hint, post_logout_redirect_uri and state; the next sign-in shows the login page")
    func oidcEndsTheSession() async throws {
        let f = try SessionFixture()
        let session = try PARSignInTests.session(f)  // by issuer: the discovery document's end_session_endpoint
        let jar = try TemporaryDirectory()
        let browser = SignInPromptTests.browser(cookies: jar)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        #expect(try await Self.signIn(session, f, redirect: redirect, browser: browser))
        #expect(try await Self.signIn(session, f, redirect: redirect, browser: browser) == false, "the session answers")
        let subject = try #require(try session.userProfile(account: "alice")?.subject)

        let outcome = try await session.logout(
            account: "alice", endBrowserSession: true, redirectURIs: redirect, timeout: .seconds(60), browser: browser)
        #expect(outcome.logout == .revoked)
        #expect(outcome.browserSession == .ended, "\(outcome)")
        #expect(try f.server.endSessions().last == .init(kind: "oidc", idTokenHintSubject: subject, state: true, ended: true))
        #expect(try f.server.browserSessionCount() == 0)
        #expect(try f.store.refreshToken(account: "alice") == nil)
        // The cookie is gone: the login page again.
        #expect(try await Self.signIn(session, f, redirect: redirect, browser: browser), "the login page after the logout")
    }

    @Test("the browser's command line holds the one-time start address: no id_token_hint, no ID token")
    func idTokenNotInArgv() async throws {
        let f = try SessionFixture()
        let session = try PARSignInTests.session(f)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        try await session.signIn(account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
        let idToken = try #require(try f.store.secret(for: ItemKey(account: "alice", kind: .idToken))?.stringValue())
        let directory = try TemporaryDirectory(prefix: "end-session-argv")
        let (browser, record) = try BrowserSignInLocalUserTests.recordingBrowser(directory)
        let outcome = try await session.logout(
            account: "alice", endBrowserSession: true, redirectURIs: redirect, timeout: .seconds(60), browser: browser)
        #expect(outcome.browserSession == .ended, "\(outcome)")
        let argv = try String(contentsOf: record, encoding: .utf8)
        #expect(argv.contains("http://127.0.0.1:\(redirect[0].port!)/start/"), "\(argv)")
        for text in ["id_token_hint", String(idToken.prefix(40)), "state=", "/oidc/", "?"] {
            #expect(!argv.contains(text), "the browser's argv holds \(text)")
        }
    }

    @Test("Auth0 (domain form): /v2/logout with client_id and returnTo; the next sign-in shows the login page")
    func auth0EndsTheSession() async throws {
        let f = try SessionFixture()
        let jar = try TemporaryDirectory()
        let browser = SignInPromptTests.browser(cookies: jar)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        #expect(try await Self.signIn(f.session, f, redirect: redirect, browser: browser))
        #expect(try await Self.signIn(f.session, f, redirect: redirect, browser: browser) == false)
        let outcome = try await f.session.logout(
            account: "alice", endBrowserSession: true, redirectURIs: redirect, timeout: .seconds(60), browser: browser)
        #expect(outcome == BrowserLogoutOutcome(logout: .revoked, browserSession: .ended), "\(outcome)")
        #expect(try f.server.endSessions().last == .init(kind: "auth0", idTokenHintSubject: nil, state: false, ended: true))
        #expect(try await Self.signIn(f.session, f, redirect: redirect, browser: browser))
    }

    @Test("without endBrowserSession the session stays (the next sign-in has no page); a server without an endpoint says so")
    func notAskedAndNotOffered() async throws {
        let f = try SessionFixture()
        let jar = try TemporaryDirectory()
        let browser = SignInPromptTests.browser(cookies: jar)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        #expect(try await Self.signIn(f.session, f, redirect: redirect, browser: browser))
        let plain = try await f.session.logout(account: "alice", endBrowserSession: false, redirectURIs: redirect, browser: browser)
        #expect(plain == BrowserLogoutOutcome(logout: .revoked, browserSession: .notAsked))
        #expect(try await Self.signIn(f.session, f, redirect: redirect, browser: browser) == false, "still signed in at the server")
        #expect(try f.server.endSessions().isEmpty)

        // A provider whose discovery document names no end_session_endpoint (Google's profile):
        // logged out here, browserSessionNotEnded, no browser opened.
        try f.server.setProfile("google")
        let google = try ProviderProfileTests.session("google", f)
        try await google.signIn(account: "bob", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
        let opener = RecordingOpener()
        let outcome = try await google.logout(account: "bob", endBrowserSession: true, redirectURIs: redirect, browser: opener)
        #expect(outcome.browserSession == .browserSessionNotEnded, "\(outcome)")
        #expect(outcome.logout != .notFound)
        #expect(try f.store.refreshToken(account: "bob") == nil)
        #expect(opener.urls.isEmpty)
        #expect(try f.server.endSessions().isEmpty)
    }
}
