import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@testable import AuthSession

/// Discovery by issuer (OIDC Discovery 1.0, RFC 8414), the exact issuer, RFC 9207's `iss` on
/// the redirect and the authorization endpoint's configuration errors (issue 26), against the
/// real test server's provider profiles.
@Suite("Discovery, exact issuer, RFC 9207, redirect configuration errors", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DiscoveryTests {
    static func configuration(_ issuer: String) throws -> AuthorizationServerConfiguration {
        try AuthorizationServerConfiguration(
            issuer: issuer, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
    }

    static func expectCode(
        _ code: AuthSessionError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
    ) async -> AuthSessionError? {
        do {
            try await body()
            Issue.record("no error; expected \(code)", sourceLocation: sourceLocation)
        } catch let error as AuthSessionError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    @Test("the discovery URL is {issuer}/.well-known/openid-configuration, with no double slash; Auth0's form is unchanged")
    func discoveryURL() throws {
        #expect(try Self.configuration("https://id.example.com/realms/staff").discoveryURL.absoluteString
            == "https://id.example.com/realms/staff/.well-known/openid-configuration")
        #expect(try Self.configuration("https://tenant.auth0.com/").discoveryURL.absoluteString
            == "https://tenant.auth0.com/.well-known/openid-configuration")
        // RFC 8414 §3.1: the well-known part goes between the host and the issuer's path; the form
        // appended to the issuer is tried after it.
        #expect(try Self.configuration("https://id.example.com/realms/staff").authorizationServerMetadataURL.absoluteString
            == "https://id.example.com/.well-known/oauth-authorization-server/realms/staff")
        #expect(try Self.configuration("https://id.example.com/realms/staff/").authorizationServerMetadataURLs.map(\.absoluteString)
            == ["https://id.example.com/.well-known/oauth-authorization-server/realms/staff",
                "https://id.example.com/realms/staff/.well-known/oauth-authorization-server"])
        #expect(try Self.configuration("https://id.example.com").authorizationServerMetadataURLs.map(\.absoluteString)
            == ["https://id.example.com/.well-known/oauth-authorization-server"])
        // The issuer is kept exactly as given: no slash added or removed.
        #expect(try Self.configuration("https://accounts.example.com").issuer == "https://accounts.example.com")
        let auth0 = try AuthorizationServerConfiguration(domain: "https://tenant.auth0.com", clientID: "abc")
        #expect(auth0.issuer == "https://tenant.auth0.com/" && !auth0.usesDiscovery && auth0.sendsConnection)
        #expect(auth0.tokenEndpoint.absoluteString == "https://tenant.auth0.com/oauth/token")
        // The loopback rule of the domain applies to the issuer.
        #expect(throws: AuthSessionError.insecureConfiguration) {
            try AuthorizationServerConfiguration(issuer: "http://id.example.com/realms/staff", clientID: "abc")
        }
    }

    @Test("every endpoint comes from the document; RFC 8414 supplies a revocation endpoint the OIDC document lacks")
    func endpointsFromDiscovery() async throws {
        let server = try AuthorizationServer()
        try server.setProfile("okta")
        let base = server.baseURL.absoluteString
        let client = AuthorizationServerClient(configuration: try Self.configuration(base + "/oauth2/default"))
        let metadata = try await client.metadata()
        #expect(metadata.issuer == base + "/oauth2/default")
        #expect(metadata.authorizationEndpoint.absoluteString == base + "/oauth2/default/v1/authorize")
        #expect(metadata.tokenEndpoint.absoluteString == base + "/oauth2/default/v1/token")
        #expect(metadata.jwksURI.absoluteString == base + "/oauth2/default/v1/keys")
        #expect(metadata.revocationEndpoint?.absoluteString == base + "/oauth2/default/v1/revoke")
        #expect(metadata.codeChallengeMethodsSupported == ["S256"])
        #expect(metadata.offersOfflineAccess && !metadata.isAuth0)
        // Cached: a second call makes no request.
        _ = try await client.metadata()
        #expect(await client.discovery.fetchCount == 1)
    }

    @Test("a document naming another issuer (a trailing slash too many) is insecureConfiguration, before any token request")
    func issuerMustMatchExactly() async throws {
        let server = try AuthorizationServer()
        try server.setProfile("keycloak")
        let client = AuthorizationServerClient(configuration: try Self.configuration(server.baseURL.absoluteString + "/realms/test/"))
        _ = await Self.expectCode(.insecureConfiguration) { _ = try await client.metadata() }
        let tokens = try server.stats().tokenRequests
        _ = await Self.expectCode(.insecureConfiguration) {
            _ = try await client.refresh(SecretBytes(utf8: "rt"), scopes: [])
        }
        #expect(try server.stats().tokenRequests == tokens)
    }

    @Test("an endpoint that is plain http to a non-loopback host is refused")
    func insecureEndpointRefused() async throws {
        let server = try AuthorizationServer()
        try server.setProfile("keycloak")
        let issuer = server.baseURL.absoluteString + "/realms/test"
        let document = #"{"issuer":"\#(issuer)","authorization_endpoint":"\#(issuer)/auth","#
            + #""token_endpoint":"http://id.example.com/token","jwks_uri":"\#(issuer)/certs"}"#
        try server.inject(.status(200, path: "/__profile/openid-configuration", body: document, contentType: "application/json"))
        let client = AuthorizationServerClient(configuration: try Self.configuration(issuer))
        _ = await Self.expectCode(.insecureConfiguration) { _ = try await client.metadata() }
    }

    @Test("kept sealed in the store: a new session needs no request; offline, a stale copy is used; no file beside the store")
    func cachedAcrossSessionsAndOffline() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        var configuration = try Self.configuration(f.server.baseURL.absoluteString + "/realms/test")
        configuration.discoveryLifetime = .zero  // always stale: every call wants a fresh copy
        let first = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        let metadata = try await first.client.metadata()
        #expect(!FileManager.default.fileExists(atPath: f.path + ".discovery.json"), "nothing is kept beside the store")
        let kept = try #require(try f.store.serverDocument(issuer: configuration.issuer))
        #expect(try DiscoveryCache.validated(kept, configuration: configuration) == metadata)
        f.server.stopTemporarily()
        // Stale and offline: the copy in memory, then the store's for a new session.
        #expect(try await first.client.metadata() == metadata)
        let second = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        #expect(try await second.client.metadata() == metadata)
        #expect(await second.client.discovery.fetchCount == 1)  // it tried, failed, used the store's copy
        // Within its lifetime, a new session does not even try.
        configuration.discoveryLifetime = .seconds(3600)
        let third = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        #expect(try await third.client.metadata() == metadata)
        #expect(await third.client.discovery.fetchCount == 0)
    }

    @Test("RFC 9207: a redirect iss other than the issuer refuses the sign-in; nothing stored")
    func redirectIssuerChecked() async throws {
        for profile in ["keycloak", "okta"] {
            let f = try SessionFixture()
            try f.server.setProfile(profile)
            let session = try ProviderProfileTests.session(profile, f)
            let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
            try f.server.armBadRedirect(.wrongIssuerParameter)
            _ = await Self.expectCode(.issuerMismatch) {
                try await session.signIn(
                    account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: BrowserSignInTests.scriptedBrowser())
            }
            #expect(try f.store.items().isEmpty, "\(profile)")
            #expect(try f.server.stats().codeGrants == 0, "\(profile): the code was never exchanged")
        }
        // The server says it sends iss, and the redirect has none: refused.
        let metadata = AuthorizationServerMetadata(
            issuer: "https://id.example.com/realms/a", authorizationEndpoint: URL(string: "https://id.example.com/a")!,
            tokenEndpoint: URL(string: "https://id.example.com/t")!, revocationEndpoint: nil,
            jwksURI: URL(string: "https://id.example.com/k")!, userinfoEndpoint: nil, scopesSupported: nil,
            codeChallengeMethodsSupported: nil, authorizationResponseIssParameterSupported: true, isAuth0: false)
        let callback = AuthorizationCallback(code: SecretBytes(utf8: "c"), redirectURI: URL(string: "http://127.0.0.1:1/cb")!)
        #expect(throws: AuthSessionError.issuerMismatch) { try TokenSession.checkIssuer(callback, metadata: metadata) }
        var good = callback
        good.issuer = "https://id.example.com/realms/a"
        try TokenSession.checkIssuer(good, metadata: metadata)
    }

    @Test("invalid_scope, unauthorized_client, invalid_request, unsupported_response_type on the redirect are authorizationMisconfigured")
    func redirectConfigurationErrors() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        for oauthError in ["invalid_scope", "unauthorized_client", "invalid_request", "unsupported_response_type"] {
            try f.server.armBadRedirect(.oauthError(oauthError, description: "Scope-x-is-not-allowed"))
            let error = await Self.expectCode(.authorizationMisconfigured) {
                try await f.session.signIn(
                    account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: BrowserSignInTests.scriptedBrowser())
            }
            #expect(error?.oauthError == oauthError)
            #expect(error?.oauthErrorDescription == "Scope-x-is-not-allowed")
            #expect(try f.store.items().isEmpty)
        }
    }

    @Test("Entra: the {tenantid} template takes the token's tid; Google's scheme-less issuer only through an explicit alias")
    func issuerTemplateAndAliases() async throws {
        let template = "https://login.example.com/{tenantid}/v2.0"
        #expect(AuthorizationServerMetadata.issuer(template, fits: "https://login.example.com/common/v2.0"))
        #expect(!AuthorizationServerMetadata.issuer(template, fits: "https://login.example.com/a/b/v2.0"))
        #expect(!AuthorizationServerMetadata.issuer(template, fits: "https://evil.example.com/common/v2.0"))
        let tid = "9188040d-6c67-4c5b-b112-36a304b66dad"
        #expect(IDTokenValidator.issuerMatches(
            "https://login.example.com/\(tid)/v2.0", expected: template, aliases: [], tenantID: tid))
        #expect(!IDTokenValidator.issuerMatches(
            "https://login.example.com/other/v2.0", expected: template, aliases: [], tenantID: tid))
        #expect(!IDTokenValidator.issuerMatches(template, expected: template + "x", aliases: [], tenantID: nil))
        #expect(!IDTokenValidator.issuerMatches(
            "accounts.google.com", expected: "https://accounts.google.com", aliases: [], tenantID: nil))
        #expect(IDTokenValidator.issuerMatches(
            "accounts.google.com", expected: "https://accounts.google.com", aliases: ["accounts.google.com"], tenantID: nil))

        // End to end: the google profile's scheme-less iss without the alias is refused.
        let f = try SessionFixture()
        try f.server.setProfile("google")
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let session = TokenSession(
            store: f.store, configuration: try Self.configuration(f.server.baseURL.absoluteString), retryPolicy: fastPolicy)
        let error = await Self.expectCode(.idTokenInvalid) {
            try await session.signIn(
                account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: BrowserSignInTests.scriptedBrowser())
        }
        #expect(error?.idTokenCheck == .issuer)
        #expect(try f.store.items().isEmpty)
    }
}
