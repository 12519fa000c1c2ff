import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// Choosing who signs in against glewlwyd 2.7.5 (Tests/Glewlwyd/serve.py) with headless Chromium
/// whose profile is kept between sign-ins, as a desktop browser keeps its cookies: glewlwyd's
/// session cookie makes a later sign-in go through without the password. glewlwyd leaves
/// `prompt=login` and `login_hint` to its login page (it passes them on in the page's URL; its
/// own page then shows the login form, pre-filled); serve.py's page does the same, so what is
/// measured here is what glewlwyd passes on and what it enforces itself (`max_age`). Whether the
/// password was typed is read from glewlwyd's log. What glewlwyd does differently is in
/// docs/providers.md.
@Suite("glewlwyd: prompt, login_hint and max_age with headless Chromium", sessionKeyringTrait, chromiumTrait, glewlwydTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct GlewlwydSignInPromptTests {
    struct Fixture {
        let server: GlewlwydServer
        let directory: TemporaryDirectory
        let session: TokenSession
        var profile: URL { directory.appending("chromium-profile") }

        init(par: Bool) throws {
            server = try GlewlwydServer(par: par)
            directory = try TemporaryDirectory()
            let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
            session = try GlewlwydChromiumSignInTests.session(server, store: store)
        }

        /// One sign-in in Chromium with the kept profile; the wrapper's clean exit is checked.
        @discardableResult
        func signIn(
            account: AccountID = "alice", prompt: SignInPrompt? = nil, loginHint: String? = nil, maxAge: Duration? = nil
        ) async throws -> SignInResult {
            var run = try ChromiumSignInTests.Run()
            run.keptProfile = profile
            do {
                let result = try await session.signIn(
                    account: account, redirectURIs: GlewlwydServer.redirectURIs, scopes: ["openid", "read"],
                    prompt: prompt, loginHint: loginHint, maxAge: maxAge, timeout: .seconds(150), browser: run.opener)
                try await run.expectCleanExit()
                return result
            } catch {
                _ = try await run.finish()
                throw error
            }
        }

        func logins(_ user: String = "alice") -> Int { server.passwordLogins(of: user) }
    }

    @Test("without PAR: a live session skips the password; prompt=login and an exceeded max_age ask again (auth_time 0 refused); login_hint pre-fills")
    func withoutPAR() async throws {
        let f = try Fixture(par: false)
        let first = try await f.signIn()
        #expect(f.logins() == 1, "\(f.server.logTail())")
        // glewlwyd's session cookie (kept in the profile) answers: no password.
        let again = try await f.signIn()
        #expect(again.profile.subject == first.profile.subject)
        #expect(f.logins() == 1, "the live session signed alice in again without the login form")
        // prompt=login: glewlwyd passes it to its login page, which shows the login form again.
        try await f.signIn(prompt: .login)
        #expect(f.logins() == 2, "prompt=login: the password again")
        // The ID token's auth_time is 0 (1970) in glewlwyd 2.7.5, whatever the session's age.
        let claims = DjangoOAuthChromiumSignInTests.claims(try #require(again.idToken?.stringValue()))
        #expect((claims["auth_time"] as? NSNumber)?.intValue == 0, "\(claims)")
        // max_age: glewlwyd itself sends a session older than it back to the login form
        // (refresh_login), but its auth_time of 0 fails the check: idTokenInvalid, nothing stored.
        try await Task.sleep(for: .seconds(2))
        do {
            try await f.signIn(account: "carol", maxAge: .seconds(1))
            Issue.record("an ID token with auth_time 0 passed max_age")
        } catch let error as AuthSessionError {
            #expect(error.code == .idTokenInvalid && error.idTokenCheck == .authenticationTime, "\(error)")
        }
        #expect(f.logins() == 3, "max_age exceeded: the password again")
        #expect(try f.session.store.refreshToken(account: "carol") == nil)
        // login_hint: passed to the login page, which pre-fills the user name: bob signs in.
        let bob = try await f.signIn(account: "bob", loginHint: GlewlwydServer.secondUsername)
        #expect(bob.profile.subject != first.profile.subject)
        #expect(f.logins(GlewlwydServer.secondUsername) == 1)
        #expect(f.logins() == 3)
        // prompt=none over a live session: glewlwyd wants an id_token_hint (invalid_request).
        do {
            try await f.signIn(account: "bob", prompt: SignInPrompt.none)
            Issue.record("glewlwyd answered prompt=none without an id_token_hint")
        } catch let error as AuthSessionError {
            #expect(error.code == .authorizationMisconfigured && error.oauthError == "invalid_request", "\(error)")
        }
    }

    @Test("logout ending the browser session at glewlwyd (its end_session endpoint, sid, post_logout_redirect_uri, state): the next sign-in asks for the password")
    func logoutEndsTheBrowserSession() async throws {
        let f = try Fixture(par: true)
        try await f.signIn()
        try await f.signIn()
        #expect(f.logins() == 1, "the live session answered the second sign-in")
        var run = try ChromiumSignInTests.Run()
        run.keptProfile = f.profile
        let outcome = try await f.session.logout(
            account: "alice", endBrowserSession: true, redirectURIs: GlewlwydServer.redirectURIs, timeout: .seconds(150),
            browser: run.opener)
        try await run.expectCleanExit()
        #expect(outcome.browserSession == .ended, "\(outcome); \(f.server.logTail())")
        #expect(try f.session.store.refreshToken(account: "alice") == nil)
        // glewlwyd's session is gone with the browser's cookie still kept: the login form again.
        try await f.signIn()
        #expect(f.logins() == 2, "the sign-in after the logout asked for the password")
    }

    @Test("with PAR (glewlwyd's default here): the pushed prompt=login and login_hint never reach its login page, as measured")
    func withPARTheLoginPageGetsNeither() async throws {
        let f = try Fixture(par: true)
        let first = try await f.signIn()
        #expect(f.logins() == 1, "\(f.server.logTail())")
        try await f.signIn(prompt: .login)
        #expect(f.logins() == 1, "glewlwyd 2.7.5 does not pass a pushed prompt=login on: the session answered")
        let hinted = try await f.signIn(account: "bob", loginHint: GlewlwydServer.secondUsername)
        #expect(hinted.profile.subject == first.profile.subject, "the pushed login_hint was not passed on: alice again")
        #expect(f.logins(GlewlwydServer.secondUsername) == 0)
    }
}
