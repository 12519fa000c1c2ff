import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// `TokenSession.signIn` end to end: the real authorization server (an OIDC provider with an
/// emulated Apple), the scripted user agent as `$BROWSER` (it follows redirects and submits
/// the form_post page as a browser does), the real loopback listener, the real keyring.
@Suite("Browser sign-in (RFC 8252 loopback + PKCE) end to end", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BrowserSignInTests {
    /// The scripted user agent as the only way to open a URL (no real browser opens).
    static func scriptedBrowser(environment extra: [String: String] = [:]) -> SystemBrowserOpener {
        var environment = ProcessInfo.processInfo.environment
        environment["BROWSER"] = "/usr/bin/python3 '\(AuthorizationServer.userAgentScript.path)'"
        environment["TOKENSTORE_USERAGENT_DETACH"] = "1"
        // The listener serves from a task that a loaded machine may start late; the user agent
        // waits for its answer as a patient browser would (its default is 10 s).
        environment["TOKENSTORE_USERAGENT_TIMEOUT"] = "120"
        for (key, value) in extra { environment[key] = value }
        return SystemBrowserOpener(environment: environment)
    }

    /// A redirect URI on a free port, registered at the server (exact match, like Auth0).
    static func registeredRedirect(_ server: AuthorizationServer, ports: [UInt16]) throws -> [URL] {
        let uris = ports.map { URL(string: "http://127.0.0.1:\($0)/callback")! }
        try server.registerRedirectURIs(uris.map(\.absoluteString))
        return uris
    }

    /// Free redirect ports (see ``LoopbackPorts/free(_:)``).
    static func freePorts(_ count: Int) throws -> [UInt16] { try LoopbackPorts.free(count) }

    /// A socket listening on 127.0.0.1:`port` (0: any), and the port it got.
    static func listeningSocket(port: UInt16) throws -> (Int32, UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SignInTestSupport.SocketError(call: "socket", number: errno) }
        var one: Int32 = 1  // as the listener does: a closed connection's TIME_WAIT does not hold the port
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && listen(descriptor, 4) == 0
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else {
            let number = errno
            close(descriptor)
            throw SignInTestSupport.SocketError(call: "bind", number: number)
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    /// Whether a listener could bind `port` now (the sign-in released it).
    static func isFree(_ port: UInt16) -> Bool {
        guard let (descriptor, _) = try? listeningSocket(port: port) else { return false }
        close(descriptor)
        return true
    }

    /// Nothing of `account` is stored: no item, and the user's state is `notFound`.
    static func expectNothingStored(_ f: SessionFixture, account: AccountID = "alice", userID: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try f.store.items().isEmpty, sourceLocation: sourceLocation)
        #expect(try f.store.accounts().isEmpty, sourceLocation: sourceLocation)
        #expect(try f.store.credentialState(forUserID: userID) == .notFound, sourceLocation: sourceLocation)
        #expect(try f.session.userProfile(account: account) == nil, sourceLocation: sourceLocation)
    }

    @Test("a browser sign-in stores refresh token, ID token, user id and profile sealed; state authorized")
    func signInStoresEverything() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        let user = "000792.browser.first.0638"
        try f.server.setNextAppleUser(user, name: "Jane Appleseed", email: "jane@privaterelay.appleid.com", firstSignIn: true)
        let shown = URLBox()
        let followed = URLBox()
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, scopes: ["openid", "profile", "email", "read:items"],
            browser: StartFollowingOpener(next: Self.scriptedBrowser(), location: followed),
            onAuthorizationURL: { shown.set($0) })
        // The app and the browser are given the one-time start address; its redirect is the
        // authorization request, with PKCE S256.
        #expect(try #require(shown.value).path.hasPrefix("/start/"))
        let url = try #require(followed.value)
        let query = Dictionary(uniqueKeysWithValues: (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(url.path == "/authorize")
        #expect(query["code_challenge_method"] == "S256")
        #expect(query["connection"] == "apple")
        #expect(query["redirect_uri"] == redirect[0].absoluteString)
        #expect(Set((query["scope"] ?? "").split(separator: " ").map(String.init)).isSuperset(of: ["openid", "offline_access"]))

        #expect(result.profile.userID == user)
        #expect(result.profile.subject == "apple|" + user)
        #expect(result.profile.name == "Jane Appleseed")
        #expect(result.profile.email == "jane@privaterelay.appleid.com")
        #expect(result.accessToken.grantedScopes.contains("read:items"))
        #expect(try f.store.appleUserID(account: "alice") == user)
        #expect(try f.store.credentialState(forUserID: user) == .authorized)
        let kinds = try #require(try f.store.accounts().first).kinds
        #expect(kinds == [.refreshToken, .appleUserID, .idToken, .profile])
        #expect(try f.session.hasValidAccessToken(for: "alice", scopes: ["read:items"]))
        let rt = try #require(try f.refreshToken())
        #expect(try f.server.introspect(rt).active)
        #expect(try f.server.stats().codeGrants == 1)
        // The port is free again.
        #expect(Self.isFree(UInt16(redirect[0].port!)))
        // Sealed: the file holds neither token, user id, name nor email.
        for suffix in ["", "-wal", "-shm"] {
            guard let bytes = try? Data(contentsOf: URL(fileURLWithPath: f.path + suffix)) else { continue }
            for needle in [rt, user, "Jane Appleseed", "jane@privaterelay", String(decoding: try #require(result.idToken).withUnsafeBytes { Array($0) }, as: UTF8.self)] {
                #expect(bytes.range(of: Data(needle.utf8)) == nil)
            }
        }

        // A second sign-in: the ID token no longer carries the name (Apple sends it once);
        // the stored profile keeps it, and the old refresh token is revoked.
        try f.server.setNextAppleUser(user)
        let second = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, browser: Self.scriptedBrowser())
        #expect(second.profile.name == "Jane Appleseed")
        #expect(second.profile.email == "jane@privaterelay.appleid.com")
        #expect(try f.session.userProfile(account: "alice")?.name == "Jane Appleseed")
        #expect(try !f.server.introspect(rt).active)
        #expect(try f.store.pendingRevocations().isEmpty)
    }

    /// What each armed bad ID token must fail, and what the sign-in must ask for to see it.
    static let badTokens: [(AuthorizationServer.BadIDToken, IDTokenCheck, audience: String?, maxAge: Duration?, acr: [String])] = [
        (.wrongAudience, .audience, nil, nil, []), (.wrongIssuer, .issuer, nil, nil, []), (.expired, .expiration, nil, nil, []),
        (.badSignature, .signature, nil, nil, []), (.unknownKeyID, .keyID, nil, nil, []), (.missingKeyID, .keyID, nil, nil, []),
        (.algorithmNone, .algorithm, nil, nil, []), (.algorithmHS256, .algorithm, nil, nil, []), (.wrongNonce, .nonce, nil, nil, []),
        (.missingNonce, .nonce, nil, nil, []), (.missingSubject, .subject, nil, nil, []),
        (.missingAuthorizedParty, .authorizedParty, "https://api.example.com/", nil, []),
        (.oldAuthTime, .authenticationTime, nil, .seconds(3600), []),
        (.missingAuthTime, .authenticationTime, nil, .seconds(3600), []),
        (.wrongACR, .authenticationContext, nil, nil, ["urn:tokenstore:test:mfa"]),
    ]

    @Test("every bad ID token is idTokenInvalid naming the check; nothing stored; the issued refresh token is revoked")
    func badIDTokens() async throws {
        #expect(Set(Self.badTokens.map(\.0)) == Set(AuthorizationServer.BadIDToken.allCases))
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        let user = "000792.bad.token.0638"
        for (index, (fault, check, audience, maxAge, acr)) in Self.badTokens.enumerated() {
            try f.server.setNextAppleUser(user)
            try f.server.armBadIDToken(fault)
            do {
                try await f.session.signIn(
                    account: "alice", redirectURIs: redirect, audience: audience, maxAge: maxAge, acrValues: acr,
                    browser: Self.scriptedBrowser())
                Issue.record("\(fault): the sign-in succeeded")
            } catch let error as AuthSessionError {
                #expect(error.code == .idTokenInvalid, "\(fault): \(error)")
                #expect(error.idTokenCheck == check, "\(fault): \(error)")
                // The error names the check, never the token or a claim.
                #expect(!"\(error)".contains(user), "\(fault)")
            }
            try Self.expectNothingStored(f, userID: user)
            let stats = try f.server.stats()
            #expect(stats.codeGrants == index + 1, "\(fault)")
            // The refresh token the server issued for the refused sign-in was revoked at once.
            #expect(stats.revocations == index + 1, "\(fault)")
            #expect(stats.activeRefreshTokens == 0, "\(fault)")
        }
        #expect(Self.isFree(UInt16(redirect[0].port!)))
        // The same flow with a good token goes through.
        try f.server.setNextAppleUser(user)
        let result = try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: Self.scriptedBrowser())
        #expect(result.profile.userID == user)
    }

    @Test("a redirect with access_denied is authorizationFailed with the OAuth error; nothing stored; port freed")
    func accessDenied() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        try f.server.armBadRedirect(.accessDenied())
        do {
            try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: Self.scriptedBrowser())
            Issue.record("the sign-in succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .authorizationFailed)
            #expect(error.oauthError == "access_denied")
        }
        try Self.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
        #expect(try f.server.stats().codeGrants == 0)
        #expect(Self.isFree(UInt16(redirect[0].port!)))
    }

    @Test("a redirect with a wrong state is refused and the wait goes on: stateMismatch at the time-out; nothing stored")
    func wrongState() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        try f.server.armBadRedirect(.wrongState)
        await expectAuthCode(.stateMismatch) {
            try await f.session.signIn(
                // The whole time-out is waited: a forged redirect must not end the sign-in. Long
                // enough for the scripted browser to reach the listener on a loaded machine (the
                // whole suite on 2 cores can hold the cooperative pool for most of a minute).
                account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: Self.scriptedBrowser())
        }
        try Self.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
        #expect(try f.server.stats().codeGrants == 0)
        #expect(Self.isFree(UInt16(redirect[0].port!)))
    }

    @Test("no redirect at all (the browser stays on a page) is timedOut; the port is freed")
    func noRedirect() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        try f.server.armBadRedirect(.noRedirect)
        await expectAuthCode(.timedOut) {
            try await f.session.signIn(
                account: "alice", redirectURIs: redirect, timeout: .seconds(3), browser: Self.scriptedBrowser())
        }
        try Self.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
        #expect(Self.isFree(UInt16(redirect[0].port!)))
    }

    @Test("a port in use moves on to the next registered redirect URI; every port in use is loopbackUnavailable before any browser")
    func portInUse() async throws {
        let f = try SessionFixture()
        let ports = try Self.freePorts(3)
        let redirect = try Self.registeredRedirect(f.server, ports: ports)
        let (holder, _) = try Self.listeningSocket(port: ports[0])
        defer { close(holder) }
        let shown = URLBox()
        try await f.session.signIn(
            account: "alice", redirectURIs: redirect,
            browser: StartFollowingOpener(next: Self.scriptedBrowser(), location: shown))
        let query = URLComponents(url: try #require(shown.value), resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(query.first { $0.name == "redirect_uri" }?.value == redirect[1].absoluteString)
        #expect(try f.store.refreshToken(account: "alice") != nil)

        let (second, _) = try Self.listeningSocket(port: ports[1])
        let (third, _) = try Self.listeningSocket(port: ports[2])
        defer { close(second); close(third) }
        let opened = RecordingOpener()
        await expectAuthCode(.loopbackUnavailable) {
            try await f.session.signIn(account: "bob", redirectURIs: redirect, browser: opened)
        }
        #expect(opened.urls.isEmpty)
    }

    @Test("redirect URIs other than http://127.0.0.1:PORT/path are insecureConfiguration before anything happens")
    func badRedirectURIs() async throws {
        let f = try SessionFixture()
        for uri in [
            "http://localhost:53180/callback", "https://127.0.0.1:53180/callback", "http://127.0.0.1/callback",
            "http://127.0.0.1:53180/callback?x=1", "http://127.0.0.1:53180/callback#f", "http://10.0.0.1:53180/callback",
            "http://[::1]:53180/callback", "http://user@127.0.0.1:53180/callback",
        ] {
            let opened = RecordingOpener()
            await expectAuthCode(.insecureConfiguration) {
                try await f.session.signIn(account: "alice", redirectURIs: [URL(string: uri)!], browser: opened)
            }
            #expect(opened.urls.isEmpty, "\(uri)")
        }
        let opened = RecordingOpener()
        await expectAuthCode(.insecureConfiguration) {
            try await f.session.signIn(account: "alice", redirectURIs: [], browser: opened)
        }
        #expect(try f.server.stats().authorizations == 0)
    }

    @Test("a time-out and a cancellation each end the wait with a typed error and release the port")
    func timeOutAndCancellation() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        let port = UInt16(redirect[0].port!)
        // The browser "opens" and the user never comes back.
        await expectAuthCode(.timedOut) {
            try await f.session.signIn(account: "alice", redirectURIs: redirect, timeout: .seconds(1), browser: RecordingOpener())
        }
        #expect(Self.isFree(port))

        let opened = RecordingOpener()
        let task = Task {
            try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: opened)
        }
        // Cancel once the browser was asked to open (the listener is bound and waiting).
        for _ in 0..<3000 where opened.urls.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(opened.urls.count == 1)
        task.cancel()
        do {
            _ = try await task.value
            Issue.record("the cancelled sign-in succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .cancelled)
        }
        #expect(Self.isFree(port))
        try Self.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
    }

    @Test("two sign-ins at once in one process each get their own answer")
    func twoAtOnce() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(2))
        let users = ["000792.concurrent.one.0001", "000792.concurrent.two.0002"]
        async let first = f.session.signIn(
            account: "alice", redirectURIs: redirect, browser: LoginHintOpener(user: users[0]))
        async let second = f.session.signIn(
            account: "bob", redirectURIs: redirect, browser: LoginHintOpener(user: users[1]))
        let results = try await [first, second]
        #expect(results.map(\.profile.userID) == users)
        #expect(try f.store.appleUserID(account: "alice") == users[0])
        #expect(try f.store.appleUserID(account: "bob") == users[1])
        let tokens = try [f.refreshToken("alice"), f.refreshToken("bob")]
        #expect(Set(tokens.compactMap { $0 }).count == 2)
        for user in users { #expect(try f.store.credentialState(forUserID: user) == .authorized) }
        #expect(try f.server.stats().codeGrants == 2)
    }

    @Test("the native Apple-code sign-in validates the ID token, sends user_profile, and stores the profile")
    func nativeExchange() async throws {
        let f = try SessionFixture()
        let user = "000792.native.first.0638"
        try f.server.setNextAppleUser(user, firstSignIn: true)
        var name = PersonName()
        name.givenName = "Ada"
        name.familyName = "Lovelace"
        let code = try f.server.appleAuthorizationCode(for: user)
        let result = try await f.session.signInWithApple(
            authorizationCode: SecretBytes(utf8: code), account: "alice", scopes: ["openid", "profile", "email"], fullName: name)
        #expect(result.profile.userID == user)
        #expect(result.profile.name == "Ada Lovelace")
        #expect(try f.store.userProfile(account: "alice")?.name == "Ada Lovelace")
        #expect(try f.store.accounts().first?.kinds.contains(.idToken) == true)

        // A bad ID token on the native path: typed error, nothing of the new sign-in stored.
        try f.server.armBadIDToken(.wrongAudience)
        let other = "000792.native.bad.0638"
        await expectAuthCode(.idTokenInvalid) {
            try await f.session.signInWithApple(
                authorizationCode: SecretBytes(utf8: try f.server.appleAuthorizationCode(for: other)), account: "bob")
        }
        #expect(try f.store.refreshToken(account: "bob") == nil)
        #expect(try f.store.credentialState(forUserID: other) == .notFound)
        // A user id the app passes must be the ID token's.
        await expectAuthCode(.idTokenInvalid) {
            try await f.session.signInWithApple(
                authorizationCode: SecretBytes(utf8: try f.server.appleAuthorizationCode(for: other)),
                appleUserID: "000792.someone.else", account: "bob")
        }
        #expect(try f.store.refreshToken(account: "bob") == nil)
        #expect(try f.server.stats().activeRefreshTokens == 1)
    }

    @Test("the scripted browser flow's wall time (p50 over 10 sign-ins)")
    func scriptedFlowTiming() async throws {
        let f = try SessionFixture()
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        var times: [Double] = []
        for _ in 0..<10 {
            let start = ContinuousClock.now
            try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: Self.scriptedBrowser())
            let elapsed = ContinuousClock.now - start
            times.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        times.sort()
        // Each sign-in replaced the one before: one refresh token active, the others revoked.
        #expect(try f.server.stats().activeRefreshTokens == 1)
        metric("signin_scripted", ["runs": times.count, "p50_ms": Int(times[times.count / 2]), "max_ms": Int(times.last!)])
    }
}

/// A value set once from a `@Sendable` callback.
final class URLBox: @unchecked Sendable {  // `stored` is guarded by `lock`
    private let lock = NSLock()
    private var stored: URL?
    var value: URL? { lock.withLock { stored } }
    func set(_ url: URL) { lock.withLock { stored = url } }
}

/// A browser that opens nothing and remembers what it was asked to open.
final class RecordingOpener: BrowserOpener, @unchecked Sendable {  // `opened` is guarded by `lock`
    private let lock = NSLock()
    private var opened: [URL] = []
    var urls: [URL] { lock.withLock { opened } }
    func open(_ url: URL) async throws { lock.withLock { opened.append(url) } }
}

/// The scripted browser signing in as a given Apple user: the test server's `login_hint`
/// picks the user per request, so concurrent sign-ins need no shared switch.
struct LoginHintOpener: BrowserOpener {
    let user: String
    func open(_ url: URL) async throws {
        // The start address redirects to the authorization URL, which gets the hint.
        let user = user
        try await StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: URLBox()) {
            URL(string: $0.absoluteString + "&login_hint=" + user)!
        }.open(url)
    }
}
