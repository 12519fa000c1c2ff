import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// Whether Debian's Chromium is installed. `scripts/install-deps` installs it, so CI runs the
/// suite; a machine without it skips the suite rather than fail it.
let chromiumTrait = Testing.ConditionTrait.enabled(
    if: chromiumInstalled, "chromium is not on PATH (scripts/install-deps installs it)")

/// `chromium` is an executable on `PATH`.
let chromiumInstalled: Bool = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    return path.split(separator: ":").contains { access("\($0)/chromium", X_OK) == 0 }
}()

/// `TokenSession.signIn` with a real browser: headless Chromium (`scripts/headless-chromium`,
/// loopback only, background networking off) as `$BROWSER` of the default
/// ``SystemBrowserOpener``, against the real authorization server and its emulated Apple (a
/// form_post page that submits itself from JavaScript), the real loopback listener and the
/// real keyring. Each test also waits for the wrapper to end and checks that no Chromium
/// process is left.
@Suite("Browser sign-in with a real browser (headless Chromium) end to end", sessionKeyringTrait, chromiumTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ChromiumSignInTests {
    static var wrapper: URL { repositoryRoot.appendingPathComponent("scripts/headless-chromium") }

    /// One Chromium run: the wrapper keeps its profile under `directory` (its TMPDIR) and
    /// writes its exit status to `statusFile` once every Chromium process is gone.
    struct Run {
        let directory: TemporaryDirectory
        var statusFile: URL { directory.appending("wrapper-status") }
        /// A browser profile kept from one run to the next (`TOKENSTORE_CHROMIUM_PROFILE`: its
        /// cookies, so a server's session); `nil`: a new profile.
        var keptProfile: URL?

        init() throws { directory = try TemporaryDirectory(prefix: "tokenstore-chromium-test") }

        /// The default opener, `$BROWSER` being the wrapper.
        var opener: SystemBrowserOpener {
            var environment = ProcessInfo.processInfo.environment
            environment["BROWSER"] = "'\(ChromiumSignInTests.wrapper.path)'"
            environment["TMPDIR"] = directory.path
            environment["TOKENSTORE_CHROMIUM_STATUS"] = statusFile.path
            if let keptProfile { environment["TOKENSTORE_CHROMIUM_PROFILE"] = keptProfile.path }
            return SystemBrowserOpener(environment: environment)
        }

        /// Waits for the wrapper to end (Chromium may still be showing the app's page when the
        /// sign-in returns); its exit status, or `nil` after `limit`.
        func finish(limit: Duration = .seconds(120)) async throws -> Int? {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if let text = try? String(contentsOf: statusFile, encoding: .utf8) {
                    return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return nil
        }

        /// Live processes (zombies aside) whose command line names this run's directory:
        /// Chromium and its helpers all carry `--user-data-dir` or a path under it.
        func leftoverProcesses() -> [String] {
            let needle = Array(directory.path.utf8)
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid in
                guard let commandLine = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                    commandLine.range(of: Data(needle)) != nil,
                    let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                    let close = stat.lastIndex(of: ")"),
                    stat[stat.index(close, offsetBy: 2)] != "Z"
                else { return nil }
                return pid
            }
        }

        /// The wrapper ended with `0`, no Chromium process is left and its profile is gone.
        func expectCleanExit(sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let status = try await finish()
            #expect(status == 0, "headless-chromium exit status", sourceLocation: sourceLocation)
            #expect(leftoverProcesses().isEmpty, "Chromium processes left behind", sourceLocation: sourceLocation)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            #expect(left.filter { $0.hasPrefix("tokenstore-chromium.") }.isEmpty, "profile left", sourceLocation: sourceLocation)
        }
    }

    @Test("a Chromium sign-in stores the Apple user, profile and a live refresh token; state authorized; port freed")
    func chromiumSignIn() async throws {
        let f = try SessionFixture()
        let ports = try BrowserSignInTests.freePorts(1)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: ports)
        let user = "000792.chromium.first.0638"
        try f.server.setNextAppleUser(user, name: "Jane Appleseed", email: "jane@privaterelay.appleid.com", firstSignIn: true)
        let run = try Run()

        let start = ContinuousClock.now
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, scopes: ["openid", "profile", "email", "read:items"],
            timeout: .seconds(120), browser: run.opener)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        metric("signin_chromium", ["seconds": String(format: "%.2f", seconds)])

        #expect(result.profile.userID == user)
        #expect(result.profile.subject == "apple|" + user)
        #expect(result.profile.name == "Jane Appleseed")
        #expect(result.profile.email == "jane@privaterelay.appleid.com")
        #expect(result.accessToken.grantedScopes.contains("read:items"))
        #expect(try f.store.appleUserID(account: "alice") == user)
        #expect(try f.store.credentialState(forUserID: user) == .authorized)
        #expect(try f.session.userProfile(account: "alice")?.name == "Jane Appleseed")
        let refreshToken = try #require(try f.refreshToken())
        #expect(try f.server.introspect(refreshToken).active)
        #expect(try f.server.stats().codeGrants == 1)
        #expect(BrowserSignInTests.isFree(ports[0]))
        try await run.expectCleanExit()
        #expect(BrowserSignInTests.isFree(ports[0]))
    }

    @Test("logout ending the browser session in Chromium (its profile kept): the next sign-in shows the login page again")
    func chromiumLogoutEndsTheSession() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let profile = try TemporaryDirectory(prefix: "tokenstore-chromium-kept")
        func run() throws -> Run {
            var run = try Run()
            run.keptProfile = profile.appending("profile")
            return run
        }
        func signIn() async throws -> Bool {
            let run = try run()
            try await f.session.signIn(account: "alice", redirectURIs: redirect, timeout: .seconds(120), browser: run.opener)
            try await run.expectCleanExit()
            return try #require(try f.server.authorizations().last).loginForm
        }
        #expect(try await signIn())
        #expect(try await signIn() == false, "Chromium's session cookie answered without the login page")
        let logout = try run()
        let outcome = try await f.session.logout(
            account: "alice", endBrowserSession: true, redirectURIs: redirect, timeout: .seconds(120), browser: logout.opener)
        try await logout.expectCleanExit()
        #expect(outcome.logout == .revoked && outcome.browserSession == .ended, "\(outcome)")
        #expect(try f.server.endSessions().last?.ended == true)
        #expect(try await signIn(), "the login page after the logout")
    }

    @Test("the user declines at Apple in Chromium: authorizationFailed with access_denied, nothing stored")
    func chromiumAccessDenied() async throws {
        let f = try SessionFixture()
        let ports = try BrowserSignInTests.freePorts(1)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: ports)
        let user = "000792.chromium.declines.0638"
        try f.server.setNextAppleUser(user, firstSignIn: true)
        try f.server.armBadRedirect(.accessDenied())
        let run = try Run()

        do {
            try await f.session.signIn(account: "alice", redirectURIs: redirect, timeout: .seconds(120), browser: run.opener)
            Issue.record("the sign-in succeeded although the user declined")
        } catch let error as AuthSessionError {
            #expect(error.code == .authorizationFailed, "got \(error)")
            #expect(error.oauthError == "access_denied")
        }
        try BrowserSignInTests.expectNothingStored(f, userID: user)
        #expect(try f.server.stats().codeGrants == 0)
        #expect(BrowserSignInTests.isFree(ports[0]))
        try await run.expectCleanExit()
    }
}
