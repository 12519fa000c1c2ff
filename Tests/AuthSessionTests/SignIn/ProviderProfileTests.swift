import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@testable import AuthSession

/// One `issuer:` configuration per provider profile of the real test server
/// (Tests/AuthServer/profiles.py: auth0, okta, keycloak, entra, google), each through sign-in
/// in the scripted browser, the cached token, rotation, concurrent renewal, logout and offline
/// logout (issue 26). The endpoints come only from discovery: every profile but auth0 answers
/// 404 to Auth0's paths.
@Suite("Provider profiles by issuer (OIDC Discovery)", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ProviderProfileTests {
    /// The issuer an app configures for `profile` (base `http://127.0.0.1:PORT`).
    static func issuer(_ profile: String, _ server: AuthorizationServer) -> String {
        let base = server.baseURL.absoluteString
        switch profile {
        case "okta": return base + "/oauth2/default"
        case "keycloak": return base + "/realms/test"
        case "entra": return base + "/common/v2.0"
        case "google": return base
        default: return base + "/"
        }
    }

    /// The path each profile's authorization endpoint has (from its discovery document).
    static let authorizationPaths = [
        "auth0": "/authorize", "okta": "/oauth2/default/v1/authorize",
        "keycloak": "/realms/test/protocol/openid-connect/auth", "entra": "/common/oauth2/v2.0/authorize",
        "google": "/o/oauth2/v2/auth",
    ]

    static func session(_ profile: String, _ f: SessionFixture, store: TokenStore? = nil) throws -> TokenSession {
        var configuration = try AuthorizationServerConfiguration(
            issuer: issuer(profile, f.server), clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        // Google's scheme-less issuer spelling, accepted only because the app says so.
        if profile == "google" { configuration.acceptedIssuerAliases = ["127.0.0.1:\(f.server.port)"] }
        // An Auth0 tenant configured by its issuer: its connection is still sent, because the app says so.
        if profile == "auth0" { configuration.sendsConnection = true }
        return TokenSession(store: store ?? f.store, configuration: configuration, retryPolicy: fastPolicy)
    }

    @Test(
        "sign-in, cached token, rotation, concurrent renewal, logout, offline logout",
        arguments: AuthorizationServer.profiles)
    func everyStage(profile: String) async throws {
        let f = try SessionFixture()
        try f.server.setProfile(profile)
        let session = try Self.session(profile, f)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let user = "000792.profile.\(profile).0638"

        // Sign-in: the discovered authorization endpoint, offline_access only where listed.
        try f.server.setNextAppleUser(user)
        let shown = URLBox()
        let result = try await session.signIn(
            account: "alice", redirectURIs: redirect, scopes: ["openid", "read:items"], audience: "https://api.example.com/",
            timeout: .seconds(60),
            // The browser is given the one-time start URL; its redirect is the authorization URL.
            browser: StartFollowingOpener(next: BrowserSignInTests.scriptedBrowser(), location: shown))
        let url = try #require(shown.value)
        let query = Dictionary(uniqueKeysWithValues: (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(url.path == Self.authorizationPaths[profile], "\(profile)")
        let scopes = Set((query["scope"] ?? "").split(separator: " ").map(String.init))
        #expect(scopes.contains("offline_access") == (profile != "google"), "\(profile): \(scopes)")
        // The API goes as RFC 8707 resource= (an issuer configuration), never Auth0's audience=.
        #expect(query["resource"] == "https://api.example.com/" && query["audience"] == nil, "\(profile)")
        #expect((query["connection"] == "apple") == (profile == "auth0"), "\(profile)")
        #expect(result.profile.subject == "apple|" + user)
        let first = try #require(try f.refreshToken())

        // Cached token: no request.
        let before = try f.server.stats().tokenRequests
        let cached = try await session.accessToken(for: "alice", audience: "https://api.example.com/", scopes: ["read:items"])
        #expect(cached.source == .cache, "\(profile)")
        #expect(try f.server.stats().tokenRequests == before, "\(profile)")

        // Rotation (none at google; entra keeps the old token valid).
        let renewed = try await session.accessToken(for: "alice", scopes: ["read:items"], forceRefresh: true)
        #expect(renewed.source == .network)
        let second = try #require(try f.refreshToken())
        switch profile {
        case "google":
            #expect(second == first)
            #expect(try f.server.introspect(first).active)
        case "entra":
            #expect(second != first)
            #expect(try f.server.introspect(first).active, "entra: a rotated-out refresh token stays valid")
        default:
            #expect(second != first, "\(profile)")
            #expect(try f.server.introspect(first).active == false, "\(profile)")
        }

        // Concurrent renewal: 8 callers of an expired token share one refresh, no reuse.
        try f.server.configure(accessTokenTTL: 1)
        _ = try await session.accessToken(for: "alice", scopes: ["read:items"], forceRefresh: true)
        try f.server.configure(accessTokenTTL: 3600)
        try await Task.sleep(for: .milliseconds(1100))
        let beforeRenewal = try f.server.stats()
        let sources = try await withThrowingTaskGroup(of: AccessToken.Source.self) { group in
            for _ in 0..<8 { group.addTask { try await session.accessToken(for: "alice", scopes: ["read:items"]).source } }
            var sources: [AccessToken.Source] = []
            for try await source in group { sources.append(source) }
            return sources
        }
        let afterRenewal = try f.server.stats()
        #expect(afterRenewal.refreshGrants - beforeRenewal.refreshGrants == 1, "\(profile)")
        #expect(afterRenewal.reuseDetections == 0, "\(profile)")
        #expect(sources.filter { $0 == .network }.count == 1, "\(profile)")

        // Logout: revoked at the discovered endpoint, or (entra) deleted here only, nothing queued.
        let live = try #require(try f.refreshToken())
        let outcome = try await session.logout(account: "alice")
        #expect(try f.store.refreshToken(account: "alice") == nil)
        #expect(try f.store.pendingRevocations().isEmpty, "\(profile)")
        if profile == "entra" {
            #expect(outcome == .notRevocable)
            #expect(try f.server.introspect(live).active, "nothing was revoked at a server that cannot revoke")
            #expect(try f.store.credentialStateHistory(forUserID: user).last?.reason == .notRevocable)
        } else {
            #expect(outcome == .revoked, "\(profile)")
            #expect(try f.server.introspect(live).active == false, "\(profile)")
        }

        // Offline logout, from a new session (a new process would read the discovery file).
        try f.server.setNextAppleUser(user)
        try await session.signIn(account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: BrowserSignInTests.scriptedBrowser())
        let offlineToken = try #require(try f.refreshToken())
        f.server.stopTemporarily()
        let fresh = try Self.session(profile, f)
        let offline = try await fresh.logout(account: "alice")
        #expect(try f.store.refreshToken(account: "alice") == nil)
        if profile == "entra" {
            #expect(offline == .notRevocable)
            #expect(try f.store.pendingRevocations().isEmpty)
        } else {
            #expect(offline == .revocationPending, "\(profile)")
            #expect(try f.store.pendingRevocations().count == 1, "\(profile)")
            try f.server.restart()
            let report = try await fresh.resumePendingRevocations(includingNotDue: true)
            #expect(report.revoked == 1, "\(profile): \(report)")
            #expect(try f.server.introspect(offlineToken).active == false, "\(profile)")
        }
    }
}
