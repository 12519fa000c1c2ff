@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// `ServerDialect`: the parameter names each family of servers is spoken to with, Auth0's paths
/// in one place, and the `additionalParameters` escape hatch (which reaches the authorization
/// and token requests and can never replace a parameter the library sends itself).
@Suite("ServerDialect", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ServerDialectTests {
    static let discovered = AuthorizationServerMetadata(
        issuer: "https://id.example.com", authorizationEndpoint: URL(string: "https://id.example.com/auth")!,
        tokenEndpoint: URL(string: "https://id.example.com/token")!, revocationEndpoint: nil,
        jwksURI: URL(string: "https://id.example.com/certs")!, userinfoEndpoint: nil, scopesSupported: ["openid"],
        codeChallengeMethodsSupported: nil, authorizationResponseIssParameterSupported: false, isAuth0: false)

    @Test("Auth0 (domain:): audience, connection, offline_access asked, Auth0's paths")
    func auth0Naming() throws {
        var configuration = try AuthorizationServerConfiguration(domain: "https://tenant.auth0.com", clientID: "abc")
        let dialect = configuration.dialect
        #expect(dialect.family == .auth0 && dialect == .auth0 && !dialect.usesDiscovery)
        #expect(dialect.apiParameterName == "audience")
        #expect(dialect.connectionParameterName == "connection")
        #expect(dialect.asksOfflineAccess(.auth0(domain: configuration.domain)))
        #expect(dialect.asksOfflineAccess(Self.discovered), "Auth0 asks unless the app says no")
        configuration.requestsOfflineAccess = false
        #expect(!configuration.dialect.asksOfflineAccess(.auth0(domain: configuration.domain)))
        #expect(!configuration.dialect.rotationRevokesAccessTokens)
    }

    @Test("OpenID Connect (issuer:): resource, no connection unless set, offline_access as the document says")
    func openIDConnectNaming() throws {
        var configuration = try AuthorizationServerConfiguration(issuer: "https://id.example.com", clientID: "abc")
        #expect(configuration.dialect.family == .openIDConnect && configuration.usesDiscovery)
        #expect(configuration.dialect.apiParameterName == "resource")
        #expect(configuration.dialect.connectionParameterName == nil)
        #expect(!configuration.dialect.asksOfflineAccess(Self.discovered), "scopes_supported does not list it")
        configuration.requestsOfflineAccess = true
        #expect(configuration.dialect.asksOfflineAccess(Self.discovered))
        configuration.sendsConnection = true
        #expect(configuration.dialect.connectionParameterName == "connection")
        #expect(configuration.dialect.apiParameterName == "resource", "the connection does not make it Auth0")
        #expect(configuration.dialect.rotationRevokesAccessTokens)
    }

    @Test("Auth0's paths: the configuration's endpoints are the Auth0 metadata's", arguments: [
        "https://tenant.auth0.com", "https://tenant.auth0.com/", "http://127.0.0.1:8080/base/", "https://h.example/a/b",
    ])
    func auth0PathsOnce(domain: String) throws {
        let configuration = try AuthorizationServerConfiguration(domain: domain, clientID: "abc")
        let metadata = AuthorizationServerMetadata.auth0(domain: configuration.domain)
        #expect(configuration.authorizationEndpoint == metadata.authorizationEndpoint)
        #expect(configuration.tokenEndpoint == metadata.tokenEndpoint)
        #expect(configuration.revocationEndpoint == metadata.revocationEndpoint)
        #expect(metadata.issuer == configuration.issuer)
        #expect(metadata.tokenEndpoint.absoluteString.hasSuffix("/oauth/token"))
        #expect(!metadata.tokenEndpoint.absoluteString.contains("//oauth"))
    }

    @Test("additionalParameters cannot name a parameter the library sends", arguments: [
        "state", "code_challenge", "code_challenge_method", "redirect_uri", "client_id", "nonce", "client_secret",
        "grant_type", "refresh_token", "code_verifier", "dpop_jkt", "STATE", "Redirect_URI", "resource", "audience",
    ])
    func reservedRefused(name: String) throws {
        var configuration = try AuthorizationServerConfiguration(domain: "https://tenant.auth0.com", clientID: "abc")
        try configuration.setAdditionalParameters(["organization": "org_1"])
        #expect(throws: AuthSessionError.insecureConfiguration) {
            try configuration.setAdditionalParameters(["invitation": "i", name: "attacker"])
        }
        #expect(configuration.dialect.additionalParameters == ["organization": "org_1"], "unchanged after a refusal")
    }

    @Test("additionalParameters: a name outside the token characters, or too long, is refused")
    func malformedRefused() throws {
        var configuration = try AuthorizationServerConfiguration(issuer: "https://id.example.com", clientID: "abc")
        for bad in [["": "x"], ["a b": "x"], ["a&b": "x"], ["a=b": "x"], ["é": "x"], ["ok": String(repeating: "v", count: 2049)]] {
            #expect(throws: AuthSessionError.insecureConfiguration) { try configuration.setAdditionalParameters(bad) }
        }
        try configuration.setAdditionalParameters(["ui_locales.x-1:y": "fr"])
        #expect(configuration.dialect.additionalParameters == ["ui_locales.x-1:y": "fr"])
    }

    @Test("the library's own parameters come first and are never repeated; the additional ones follow in name order")
    func addingKeepsTheLibrarysParameters() throws {
        var configuration = try AuthorizationServerConfiguration(domain: "https://tenant.auth0.com", clientID: "abc")
        try configuration.setAdditionalParameters(["zeta": "2", "organization": "org_1"])
        let form = configuration.dialect.adding(to: [("client_id", .text("abc")), ("state", .text("s"))])
        #expect(form.map(\.0) == ["client_id", "state", "organization", "zeta"])
    }
}

/// The escape hatch against the real test server: the browser sign-in's authorization request
/// (as the browser got it, and as the server logged it) and the token requests (the bodies that
/// went over the real `CurlTransport`, seen by a recording wrapper) carry the parameters, and
/// the sign-in still succeeds with the library's own state, PKCE and redirect.
@Suite("ServerDialect: additionalParameters reach the requests", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ServerDialectRequestTests {
    /// The real transport, with each request's form body kept for the test to read.
    final class RecordingTransport: HTTPTransport, @unchecked Sendable {  // `bodies` only under `lock`
        private let lock = NSLock()
        private var bodies: [(path: String, form: [String: [String]])] = []
        private let real = CurlTransport()

        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            var form: [String: [String]] = [:]
            if let body = request.body, let text = String(data: body, encoding: .utf8) {
                for item in URLComponents(string: "?" + text.replacingOccurrences(of: "+", with: "%20"))?.queryItems ?? [] {
                    form[item.name, default: []].append(item.value ?? "")
                }
            }
            lock.withLock { bodies.append((request.url.path, form)) }
            return try await real.send(request)
        }

        func forms(at path: String) -> [[String: [String]]] { lock.withLock { bodies.filter { $0.path == path }.map(\.form) } }
    }

    @Test("browser sign-in and renewal: the authorization URL and the token requests carry them once")
    func signInAndRefresh() async throws {
        let f = try SessionFixture()
        var configuration = try AuthorizationServerConfiguration(
            issuer: f.server.issuer, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.sendsConnection = true
        try configuration.setAdditionalParameters(["organization": "org_1", "ui_locales": "fr en"])
        let transport = RecordingTransport()
        let session = TokenSession(store: f.store, configuration: configuration, transport: transport, retryPolicy: fastPolicy)
        let (result, url) = try await PARSignInTests.signIn(f, session)

        let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(query.filter { $0.name == "organization" }.map(\.value) == ["org_1"], "\(url)")
        #expect(query.filter { $0.name == "ui_locales" }.map(\.value) == ["fr en"])
        for name in ["state", "code_challenge", "redirect_uri", "client_id"] {
            #expect(query.filter { $0.name == name }.count == 1, "\(name) once")
        }
        #expect(try PARSignInTests.lastAuthorize(f).contains("organization"), "the server saw it")

        let token = try #require(URL(string: try await session.client.metadata().tokenEndpoint.absoluteString)).path
        let exchange = try #require(transport.forms(at: token).first)
        #expect(exchange["grant_type"] == ["authorization_code"])
        #expect(exchange["organization"] == ["org_1"] && exchange["ui_locales"] == ["fr en"])
        #expect(exchange["client_id"] == [AuthorizationServer.publicClientID])

        _ = try await session.renew(account: "alice")
        let refresh = try #require(transport.forms(at: token).last)
        #expect(refresh["grant_type"] == ["refresh_token"])
        #expect(refresh["organization"] == ["org_1"])
        #expect(result.accessToken.grantedScopes.contains("read:items"))
    }
}
