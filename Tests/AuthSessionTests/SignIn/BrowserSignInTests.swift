import AuthSession
import Foundation
import Testing
import TestSupport
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// `TokenSession.signIn` end to end: the real authorization server (an OIDC provider with an
/// emulated Apple), the scripted user agent as `$BROWSER` (it follows redirects and submits
/// the form_post page as a browser does), the real loopback listener, the real keyring.
@Suite("Browser sign-in (RFC 8252 loopback + PKCE) end to end", sessionKeyringTrait, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BrowserSignInTests {
    /// The scripted user agent as the only way to open a URL (no real browser opens).
    static func scriptedBrowser(environment extra: [String: String] = [:]) -> SystemBrowserOpener {
        var environment = ProcessInfo.processInfo.environment
        environment["BROWSER"] = "/usr/bin/python3 '\(AuthorizationServer.userAgentScript.path)'"
        environment["TOKENSTORE_USERAGENT_DETACH"] = "1"
        for (key, value) in extra { environment[key] = value }
        return SystemBrowserOpener(environment: environment)
    }

    /// A redirect URI on a free port, registered at the server (exact match, like Auth0).
    static func registeredRedirect(_ server: AuthorizationServer, ports: [UInt16]) throws -> [URL] {
        let uris = ports.map { URL(string: "http://127.0.0.1:\($0)/callback")! }
        try server.registerRedirectURIs(uris.map(\.absoluteString))
        return uris
    }

    /// Ports nothing listens on now (bound to 0, read back, closed).
    static func freePorts(_ count: Int) throws -> [UInt16] {
        var sockets: [Int32] = []
        defer { sockets.forEach { _ = close($0) } }
        return try (0..<count).map { _ in
            let (descriptor, port) = try listeningSocket(port: 0)
            sockets.append(descriptor)
            return port
        }
    }

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
        let result = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, scopes: ["openid", "profile", "email", "read:items"],
            browser: Self.scriptedBrowser(), onAuthorizationURL: { shown.set($0) })
        // The URL handed to the app is the authorization request, with PKCE S256.
        let url = try #require(shown.value)
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
        #expect(result.accessToken.scopes.contains("read:items"))
        #expect(try f.store.appleUserID(account: "alice") == user)
        #expect(try f.store.credentialState(forUserID: user) == .authorized)
        let kinds = try #require(try f.store.accounts().first).kinds
        #expect(kinds == [.refreshToken, .appleUserID, .accessToken, .idToken, .profile])
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
}

/// A value set once from a `@Sendable` callback.
final class URLBox: @unchecked Sendable {  // `stored` is guarded by `lock`
    private let lock = NSLock()
    private var stored: URL?
    var value: URL? { lock.withLock { stored } }
    func set(_ url: URL) { lock.withLock { stored = url } }
}
