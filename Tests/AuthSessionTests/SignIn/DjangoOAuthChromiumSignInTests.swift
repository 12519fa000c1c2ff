import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// One real server nobody here wrote: django-oauth-toolkit (Tests/DjangoOAuth, DOT configured
/// as its documentation says: OIDC, RS256, PKCE required, mounted at /o/, refresh-token
/// rotation by default) and headless Chromium logging in at DOT's login step, through every
/// stage: sign-in by issuer (discovery), the exact issuer in the ID token, the cached token,
/// rotation, concurrent renewal, logout and offline logout (issue 26 item 7).
///
/// DOT's OIDC discovery document has no `revocation_endpoint`; its RFC 8414 document at
/// `{issuer}/.well-known/oauth-authorization-server` has `/o/revoke_token/`, and the client
/// takes it from there, so logout revokes.
@Suite("django-oauth-toolkit by issuer with headless Chromium", sessionKeyringTrait, chromiumTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DjangoOAuthChromiumSignInTests {
    static func session(_ server: DjangoOAuthServer, store: TokenStore) throws -> TokenSession {
        let configuration = try AuthorizationServerConfiguration(
            issuer: server.issuer, clientID: DjangoOAuthServer.clientID, requestTimeout: .seconds(10))
        return TokenSession(store: store, configuration: configuration, retryPolicy: fastPolicy)
    }

    /// The claims of a compact JWS (the payload, base64url-decoded), unverified: the client
    /// verified it; the test reads what it accepted.
    static func claims(_ jwt: String) -> [String: Any] {
        let parts = jwt.split(separator: ".")
        guard parts.count == 3 else { return [:] }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text) else { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    func chromiumSignIn(_ session: TokenSession, scopes: [String] = ["openid", "read"]) async throws -> SignInResult {
        let run = try ChromiumSignInTests.Run()
        let result = try await session.signIn(
            account: "alice", redirectURIs: DjangoOAuthServer.redirectURIs, scopes: scopes,
            timeout: .seconds(120), browser: run.opener)
        try await run.expectCleanExit()
        return result
    }

    @Test("sign-in, exact issuer, cached token, rotation, concurrent renewal, logout, offline logout")
    func everyStage() async throws {
        let suiteStart = ContinuousClock.now
        let server = try DjangoOAuthServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try Self.session(server, store: store)
        func refreshToken() throws -> String? { try store.refreshToken(account: "alice")?.stringValue() }

        // Sign-in: DOT's authorization endpoint from discovery, its login page, PKCE, RS256.
        let start = ContinuousClock.now
        let result = try await chromiumSignIn(session)
        metric("signin_dot_chromium", ["seconds": String(format: "%.2f", (ContinuousClock.now - start) / .seconds(1))])
        #expect(result.profile.subject == "1", "DOT's sub is the Django user's pk")
        #expect(result.accessToken.grantedScopes.contains("read"))
        let idToken = try #require(result.idToken?.stringValue())
        let claims = Self.claims(idToken)
        #expect(claims["iss"] as? String == server.issuer, "the ID token's iss is DOT's issuer exactly")
        #expect(claims["aud"] as? String == DjangoOAuthServer.clientID || (claims["aud"] as? [String]) == [DjangoOAuthServer.clientID])
        #expect(try store.credentialState(forUserID: "1") == .authorized)
        let first = try #require(try refreshToken())
        #expect(try server.stats()["authorization_code"] == 1)

        // The issuer with a slash added is another issuer: refused, not "fixed".
        do {
            let slashed = try AuthorizationServerConfiguration(
                issuer: server.issuer + "/", clientID: DjangoOAuthServer.clientID, requestTimeout: .seconds(10))
            let other = TokenSession(store: try TokenStore(path: directory.appending("other/tokens.sqlite").path, appID: sessionAppID), configuration: slashed, retryPolicy: fastPolicy)
            _ = try await other.signIn(
                account: "bob", redirectURIs: DjangoOAuthServer.redirectURIs, timeout: .seconds(20),
                browser: BrowserSignInTests.scriptedBrowser())
            Issue.record("a sign-in with issuer …/o/ succeeded against DOT's …/o")
        } catch let error as AuthSessionError {
            #expect(error.code == .insecureConfiguration, "the discovered issuer is not the configured one: \(error)")
        }

        // Cached token: no request.
        let before = try server.stats()
        let cached = try await session.accessToken(for: "alice", scopes: ["read"])
        #expect(cached.source == .cache)
        #expect(try server.stats() == before)
        #expect(try server.apiAccepts(try #require(cached.token.stringValue())), "DOT's API takes the cached token")

        // Rotation: a new refresh token, and DOT refuses the old one.
        let renewed = try await session.accessToken(for: "alice", scopes: ["read"], forceRefresh: true)
        #expect(renewed.source == .network)
        let second = try #require(try refreshToken())
        #expect(second != first)
        #expect(try server.refreshTokenIsRefused(first), "DOT rotated the refresh token out")
        // DOT revokes the access token of a rotated-out refresh token: the sign-in's token
        // (scopes openid read) covers "read" but is dead at DOT now, so it is not served.
        let afterRotation = try await session.accessToken(for: "alice", scopes: ["read"])
        #expect(try server.apiAccepts(try #require(afterRotation.token.stringValue())), "the token served after a rotation is live at DOT")
        #expect(try server.apiAccepts(try #require(renewed.token.stringValue())))

        // Concurrent renewal: 8 callers of an expired token share one refresh.
        try server.setAccessTokenLifetime(seconds: 1)
        _ = try await session.accessToken(for: "alice", scopes: ["read"], forceRefresh: true)
        try server.setAccessTokenLifetime(seconds: 3600)
        try await Task.sleep(for: .milliseconds(1100))
        let beforeRenewal = try server.stats()
        let sources = try await withThrowingTaskGroup(of: AccessToken.Source.self) { group in
            for _ in 0..<8 { group.addTask { try await session.accessToken(for: "alice", scopes: ["read"]).source } }
            var sources: [AccessToken.Source] = []
            for try await source in group { sources.append(source) }
            return sources
        }
        let afterRenewal = try server.stats()
        #expect(afterRenewal["refresh_token"]! - beforeRenewal["refresh_token"]! == 1)
        #expect(afterRenewal["refresh_token_ok"]! - beforeRenewal["refresh_token_ok"]! == 1)
        #expect(sources.filter { $0 == .network }.count == 1, "\(sources)")
        // What the cache serves once the "read" token expired is live at DOT: not the
        // sign-in's token (scopes openid read), which DOT revoked with its refresh token.
        let served = try await session.accessToken(for: "alice", scopes: ["read"])
        #expect(try server.apiAccepts(try #require(served.token.stringValue())), "the cache served a token DOT revoked at rotation")

        // Logout: revoked at /o/revoke_token/ (from DOT's RFC 8414 document).
        let live = try #require(try refreshToken())
        let revocationsBefore = try server.stats()["revocations"]!
        let outcome = try await session.logout(account: "alice")
        #expect(outcome == .revoked)
        #expect(try store.refreshToken(account: "alice") == nil)
        #expect(try store.pendingRevocations().isEmpty)
        #expect(try server.stats()["revocations"]! == revocationsBefore + 1)
        #expect(try server.refreshTokenIsRefused(live), "DOT revoked the refresh token")

        // Offline logout: DOT stopped, a new session queues it; revoked when DOT is back.
        _ = try await chromiumSignIn(session)
        let offlineToken = try #require(try refreshToken())
        server.stopTemporarily()
        let fresh = try Self.session(server, store: store)
        let offline = try await fresh.logout(account: "alice")
        #expect(offline == .revocationPending)
        #expect(try store.refreshToken(account: "alice") == nil)
        #expect(try store.pendingRevocations().count == 1)
        try server.restart()
        let report = try await fresh.resumePendingRevocations(includingNotDue: true)
        #expect(report.revoked == 1, "\(report)")
        #expect(try store.pendingRevocations().isEmpty)
        #expect(try server.refreshTokenIsRefused(offlineToken), "revoked once DOT was back")
        metric("dot_suite", ["seconds": String(format: "%.2f", (ContinuousClock.now - suiteStart) / .seconds(1))])
    }
}
