import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// The browser sign-in end to end against another local user (review N1): what goes on a
/// command line, and a sign-in that would put another user under an account. The real
/// authorization server, the scripted user agent behind a `$BROWSER` wrapper, the real keyring.
@Suite("Browser sign-in against other local users", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BrowserSignInLocalUserTests {
    /// `$BROWSER` as a shell script that records its arguments (and its own
    /// /proc/PID/cmdline, what every local user can read), then runs the scripted user agent.
    static func recordingBrowser(_ directory: TemporaryDirectory) throws -> (SystemBrowserOpener, URL) {
        let record = directory.appending("argv")
        // Written through an O_CLOEXEC descriptor (BrowserOpenerTests.Fixture.script): written with
        // String.write, a child another test spawned meanwhile kept it open for writing and
        // starting it failed with ETXTBSY ("could not start (errno 26)", seen in CI).
        let script = URL(fileURLWithPath: try BrowserOpenerTests.Fixture.script(
            in: directory, named: "browser.sh",
            """
            tr '\\0' '\\n' < /proc/$$/cmdline > '\(record.path)'
            exec /usr/bin/python3 '\(AuthorizationServer.userAgentScript.path)' "$@"

            """))
        var environment = ProcessInfo.processInfo.environment
        environment["BROWSER"] = script.path
        environment["TOKENSTORE_USERAGENT_DETACH"] = "1"
        environment["TOKENSTORE_USERAGENT_TIMEOUT"] = "120"
        return (SystemBrowserOpener(environment: environment), record)
    }

    @Test("the browser's command line holds the one-time start URL: no state, nonce nor code challenge")
    func browserArgvHoldsNoAuthorizationParameters() async throws {
        let f = try SessionFixture()
        let directory = try TemporaryDirectory(prefix: "signin-argv")
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let (browser, record) = try Self.recordingBrowser(directory)
        let shown = URLBox()
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, browser: browser, onAuthorizationURL: { shown.set($0) })
        #expect(result.profile.userID == AuthorizationServer.defaultAppleUserID)
        let argv = try String(contentsOf: record, encoding: .utf8)
        let port = redirect[0].port!
        #expect(argv.contains("http://127.0.0.1:\(port)/start/"), "\(argv)")
        for parameter in ["state=", "nonce=", "code_challenge", "redirect_uri", "/authorize"] {
            #expect(!argv.contains(parameter), "argv holds \(parameter)")
        }
        // The app is shown the same one-time address, which now refuses (it was used).
        let start = try #require(shown.value)
        #expect(argv.contains(start.absoluteString))
        #expect(try f.server.stats().authorizations == 1)
    }

    @Test("re-signing an account as another user is userChanged (nothing stored, token revoked) unless allowed")
    func reSigningAsAnotherUser() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let first = "000792.first.user.0638"
        let second = "000792.second.user.0638"
        try f.server.setNextAppleUser(first)
        try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
        let firstToken = try #require(try f.refreshToken())

        // The same user again: allowed as before.
        try f.server.setNextAppleUser(first)
        try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
        let sameToken = try #require(try f.refreshToken())
        #expect(sameToken != firstToken)

        // Another user, by default: refused.
        try f.server.setNextAppleUser(second)
        do {
            try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser())
            Issue.record("another user was signed into alice")
        } catch let error as AuthSessionError {
            #expect(error.code == .userChanged, "\(error)")
            #expect(!"\(error)".contains(first) && !"\(error)".contains(second))
        }
        #expect(try f.store.appleUserID(account: "alice") == first)
        #expect(try f.refreshToken() == sameToken)
        #expect(try f.server.introspect(sameToken).active)
        #expect(try f.store.credentialState(forUserID: first) == .authorized)
        #expect(try f.store.credentialState(forUserID: second) == .notFound)
        // The refresh token issued to the refused sign-in was revoked at once.
        #expect(try f.server.stats().activeRefreshTokens == 1)

        // Allowed: the account now holds the second user; the first is recorded revoked.
        try f.server.setNextAppleUser(second)
        let changed = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, browser: BrowserSignInTests.scriptedBrowser(), allowsUserChange: true)
        #expect(changed.profile.userID == second)
        #expect(try f.store.appleUserID(account: "alice") == second)
        #expect(try f.store.credentialState(forUserID: second) == .authorized)
        #expect(try f.store.credentialState(forUserID: first) == .revoked)
        #expect(try !f.server.introspect(sameToken).active)
    }

    @Test("the Apple-code sign-in refuses another user the same way, and allows it when asked")
    func appleCodeSignInAsAnotherUser() async throws {
        let f = try SessionFixture()
        let first = "000792.code.first.0638"
        let second = "000792.code.second.0638"
        try await f.session.signInWithApple(
            authorizationCode: SecretBytes(utf8: try f.server.appleAuthorizationCode(for: first)), account: "alice")
        do {
            try await f.session.signInWithApple(
                authorizationCode: SecretBytes(utf8: try f.server.appleAuthorizationCode(for: second)), account: "alice")
            Issue.record("another user was signed into alice")
        } catch let error as AuthSessionError {
            #expect(error.code == .userChanged, "\(error)")
        }
        #expect(try f.store.appleUserID(account: "alice") == first)
        #expect(try f.server.stats().activeRefreshTokens == 1)
        try await f.session.signInWithApple(
            authorizationCode: SecretBytes(utf8: try f.server.appleAuthorizationCode(for: second)), account: "alice",
            allowsUserChange: true)
        #expect(try f.store.appleUserID(account: "alice") == second)
    }
}
