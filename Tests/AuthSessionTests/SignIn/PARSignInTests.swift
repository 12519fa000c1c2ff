@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Pushed authorization requests (RFC 9126) in the browser sign-in, against the test server
/// (Tests/AuthServer: `/oauth/par` advertised in its discovery document while switched on) and
/// the scripted user agent as the browser. The URL the browser is given is read back twice: from
/// the one-time start page's redirect (what the browser opens) and from the server's log of the
/// parameter names each `GET /authorize` carried.
@Suite("PAR: the browser gets only client_id and request_uri", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PARSignInTests {
    /// The parameters a sign-in must never put in the browser's URL once it pushes them.
    static let authorizationParameters: Set<String> = [
        "state", "nonce", "code_challenge", "code_challenge_method", "scope", "redirect_uri", "response_type",
        "dpop_jkt", "connection", "audience", "resource",
    ]

    static func session(_ f: SessionFixture, dpop: Bool = false) throws -> TokenSession {
        var configuration = try AuthorizationServerConfiguration(
            issuer: f.server.issuer, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.usesDPoP = dpop
        // connection=apple goes straight to the emulated Apple page (without it the test server
        // shows Auth0's login page, whose button sends the browser to /authorize again).
        configuration.sendsConnection = true
        return TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
    }

    /// One sign-in through the scripted browser; the authorization URL the browser was given.
    static func signIn(_ f: SessionFixture, _ session: TokenSession) async throws -> (SignInResult, URL) {
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let followed = URLBox()
        let result = try await session.signIn(
            account: "alice", redirectURIs: redirect, connection: "apple", scopes: ["openid", "read:items"],
            browser: StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: followed))
        return (result, try #require(followed.value))
    }

    static func queryNames(_ url: URL) -> [String] {
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map(\.name).sorted()
    }

    /// The parameter names of the last `GET /authorize` the server saw.
    static func lastAuthorize(_ f: SessionFixture) throws -> [String] {
        (try f.server.device()["authorize_log"] as? [[String]] ?? []).last ?? []
    }

    @Test("advertised: the request is pushed, the browser's URL and the server's log have only client_id and request_uri")
    func pushed() async throws {
        let f = try SessionFixture()
        try f.server.configurePAR(enabled: true)
        let (result, url) = try await Self.signIn(f, try Self.session(f))
        #expect(url.path == "/authorize")
        #expect(Self.queryNames(url) == ["client_id", "request_uri"], "\(url)")
        let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(query.first { $0.name == "request_uri" }?.value?.hasPrefix("urn:ietf:params:oauth:request_uri:") == true)
        #expect(try Self.lastAuthorize(f) == ["client_id", "request_uri"], "the server's log of the browser's request")
        #expect(Set(try Self.lastAuthorize(f)).isDisjoint(with: Self.authorizationParameters))
        #expect(try f.server.counter("par_requests") == 1)
        #expect(try f.server.counter("par_authorizations") == 1)
        #expect(result.accessToken.grantedScopes.contains("read:items"))
        #expect(try f.store.credentialState(forUserID: result.profile.userID ?? "") == .authorized)
    }

    @Test("not advertised: no push, the parameters stay in the URL (the browser sign-in as before)")
    func notAdvertised() async throws {
        let f = try SessionFixture()
        let (_, url) = try await Self.signIn(f, try Self.session(f))
        #expect(Set(Self.queryNames(url)).isSuperset(of: ["state", "nonce", "code_challenge", "redirect_uri", "scope"]))
        #expect(try f.server.counter("par_requests") == 0)
    }

    @Test("required by the server: /authorize without request_uri is refused there, and the sign-in pushes")
    func required() async throws {
        let f = try SessionFixture()
        try f.server.configurePAR(enabled: true, required: true)
        let (result, url) = try await Self.signIn(f, try Self.session(f))
        #expect(Self.queryNames(url) == ["client_id", "request_uri"])
        #expect(try f.store.refreshToken(account: "alice") != nil)
        _ = result
    }

    @Test("DPoP-bound through PAR: a proof at /oauth/par binds the code; token_type DPoP, cnf.jkt our key")
    func dpopBound() async throws {
        let f = try SessionFixture()
        try f.server.configurePAR(enabled: true)
        let before = try f.server.counter("dpop_proofs")
        let (result, url) = try await Self.signIn(f, try Self.session(f, dpop: true))
        #expect(Self.queryNames(url) == ["client_id", "request_uri"], "dpop_jkt was pushed, not put in the URL")
        let jkt = try #require(try await DPoPKeys.load(store: f.store)).thumbprint
        #expect(result.accessToken.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(result.accessToken.token.stringValue())).jkt == jkt)
        #expect(try f.server.counter("dpop_proofs") - before >= 2, "a proof at /oauth/par and one at /oauth/token")
    }

    @Test("a document that requires PAR and names no endpoint is refused; a PAR endpoint must be https or loopback")
    func documentChecks() throws {
        func document(_ extra: String) -> [UInt8] {
            Array(("{\"issuer\":\"https://id.example.com\",\"authorization_endpoint\":\"https://id.example.com/auth\","
                + "\"token_endpoint\":\"https://id.example.com/token\",\"jwks_uri\":\"https://id.example.com/jwks\"" + extra + "}").utf8)
        }
        #expect(throws: AuthSessionError.unexpectedResponse) {
            try AuthorizationServerMetadata.discovered(
                document(",\"require_pushed_authorization_requests\":true"), expectedIssuer: "https://id.example.com")
        }
        #expect(throws: AuthSessionError.insecureConfiguration) {
            try AuthorizationServerMetadata.discovered(
                document(",\"pushed_authorization_request_endpoint\":\"http://id.example.com/par\""), expectedIssuer: "https://id.example.com")
        }
        let required = try AuthorizationServerMetadata.discovered(
            document(",\"pushed_authorization_request_endpoint\":\"https://id.example.com/par\",\"require_pushed_authorization_requests\":true"),
            expectedIssuer: "https://id.example.com")
        #expect(required.requirePushedAuthorizationRequests)
        #expect(required.pushedAuthorizationRequestEndpoint?.absoluteString == "https://id.example.com/par")
    }

    @Test("the server refuses the pushed request: authorizationMisconfigured, the browser never opened, nothing stored")
    func refused() async throws {
        let f = try SessionFixture()
        try f.server.configurePAR(enabled: true)
        try f.server.inject(.status(400, path: "/oauth/par", body: #"{"error":"invalid_scope"}"#, contentType: "application/json"))
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let opened = URLBox()
        do {
            _ = try await Self.session(f).signIn(
                account: "alice", redirectURIs: redirect, browser: StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: opened))
            Issue.record("a refused pushed request signed in")
        } catch let error as AuthSessionError {
            #expect(error.code == .authorizationMisconfigured && error.oauthError == "invalid_scope", "\(error)")
        }
        #expect(opened.value == nil, "the browser was not opened")
        #expect(try f.store.items().isEmpty)
        #expect(BrowserSignInTests.isFree(UInt16(redirect[0].port!)), "the listener was closed")
    }
}
