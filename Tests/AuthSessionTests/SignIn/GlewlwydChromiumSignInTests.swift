@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Whether Debian's glewlwyd is installed; a machine without it skips the suites.
let glewlwydTrait = Testing.ConditionTrait.enabled(
    if: glewlwydInstalled, "glewlwyd is not installed (scripts/install-deps installs it)")

/// A second real server nobody here wrote: Debian's glewlwyd 2.7.5 (its OIDC plugin, configured
/// through its admin API by Tests/Glewlwyd/serve.py) and headless Chromium signing in at its
/// login step. Sign-in by issuer (discovery, PKCE S256, RS256), rotation, revocation as glewlwyd
/// does it (only for an authenticated client) and a DPoP-bound sign-in (glewlwyd implements
/// DPoP draft 07's proofs: `htm`, `htu`, `jti`, `iat`, `ath`). Glewlwyd advertises a PAR
/// endpoint, so these sign-ins push their request (GlewlwydPARSignInTests checks the URL). What
/// glewlwyd does differently from the RFCs is in docs/providers.md.
@Suite("glewlwyd by issuer with headless Chromium", sessionKeyringTrait, chromiumTrait, glewlwydTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct GlewlwydChromiumSignInTests {
    static func session(
        _ server: GlewlwydServer, store: TokenStore, clientID: String = GlewlwydServer.publicClientID,
        secret: String? = nil, dpop: Bool = false
    ) throws -> TokenSession {
        var configuration = try AuthorizationServerConfiguration(
            issuer: server.issuer, clientID: clientID, clientSecret: secret.map { SecretBytes(utf8: $0) },
            requestTimeout: .seconds(10))
        configuration.usesDPoP = dpop
        return TokenSession(store: store, configuration: configuration, retryPolicy: fastPolicy)
    }

    static func chromiumSignIn(
        _ session: TokenSession, account: AccountID = "alice", scopes: [String] = ["openid", "read"],
        location: URLBox? = nil
    ) async throws -> SignInResult {
        let run = try ChromiumSignInTests.Run()
        var opener: any BrowserOpener = run.opener
        if let location { opener = StartFollowingOpener(next: run.opener, location: location) }
        let result = try await session.signIn(
            account: account, redirectURIs: GlewlwydServer.redirectURIs, scopes: scopes, timeout: .seconds(150),
            browser: opener)
        try await run.expectCleanExit()
        return result
    }

    @Test("sign-in by issuer, exact issuer, rotation; logout: refused for the public client, revoked for the confidential one")
    func everyStage() async throws {
        let start = ContinuousClock.now
        let server = try GlewlwydServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try Self.session(server, store: store)
        func refreshToken() throws -> String? { try store.refreshToken(account: "alice")?.stringValue() }

        let result = try await Self.chromiumSignIn(session)
        metric("signin_glewlwyd_chromium", ["seconds": String(format: "%.2f", (ContinuousClock.now - start) / .seconds(1))])
        let idToken = try #require(result.idToken?.stringValue())
        let claims = DjangoOAuthChromiumSignInTests.claims(idToken)
        #expect(claims["iss"] as? String == server.issuer, "the ID token's iss is glewlwyd's issuer exactly")
        #expect(!result.profile.subject.isEmpty)
        #expect(result.accessToken.grantedScopes.contains("read"))
        #expect(try server.userinfoAccepts(try #require(result.accessToken.token.stringValue())))
        let first = try #require(try refreshToken())

        // Rotation: a new refresh token; glewlwyd refuses the old one (a bare 400).
        let renewed = try await session.accessToken(for: "alice", scopes: ["read"], forceRefresh: true)
        #expect(renewed.source == .network)
        let second = try #require(try refreshToken())
        #expect(second != first)
        #expect(try server.refreshTokenIsRefused(first), "glewlwyd rotated the refresh token out")

        // Glewlwyd 2.7.5 revokes only for an authenticated client: a public client's revocation
        // is refused 401, so the logout says so and keeps the token flagged in the outbox.
        let outcome = try await session.logout(account: "alice")
        #expect(outcome == .revocationFailed(.invalidClient), "\(outcome)")
        #expect(try store.refreshToken(account: "alice") == nil)
        #expect(try store.pendingRevocations().count == 1)

        // The confidential client (client_secret_post): the logout revokes.
        let confidential = try Self.session(
            server, store: store, clientID: GlewlwydServer.confidentialClientID, secret: try server.confidentialSecret)
        _ = try await Self.chromiumSignIn(confidential, account: "bob")
        let live = try #require(try store.refreshToken(account: "bob")?.stringValue())
        #expect(try await confidential.logout(account: "bob") == .revoked)
        #expect(try server.refreshTokenIsRefused(live, clientID: GlewlwydServer.confidentialClientID, secret: try server.confidentialSecret))
        metric("glewlwyd_suite", ["seconds": String(format: "%.2f", (ContinuousClock.now - start) / .seconds(1))])
    }

    @Test("a DPoP-bound sign-in: token_type DPoP, the access token's cnf.jkt is our key, refresh proves with it")
    func dpopBoundSignIn() async throws {
        let server = try GlewlwydServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try Self.session(server, store: store, dpop: true)
        let result = try await Self.chromiumSignIn(session)
        let jkt = try #require(try await DPoPKeys.load(store: store)).thumbprint
        #expect(result.accessToken.tokenType.lowercased() == "dpop", "\(result.accessToken.tokenType)")
        let access = DjangoOAuthChromiumSignInTests.claims(try #require(result.accessToken.token.stringValue()))
        #expect((access["cnf"] as? [String: Any])?["jkt"] as? String == jkt, "glewlwyd bound the token to our key")
        #expect(try store.dpopBinding(account: "alice") == jkt)
        // A refresh without a proof is refused by glewlwyd (the token is bound); ours proves.
        let renewed = try await session.renew(account: "alice", scopes: ["read"])
        #expect(renewed.source == .network)
        let refreshed = DjangoOAuthChromiumSignInTests.claims(try #require(renewed.token.stringValue()))
        #expect((refreshed["cnf"] as? [String: Any])?["jkt"] as? String == jkt)
        let rt = try #require(try store.refreshToken(account: "alice")?.stringValue())
        #expect(try server.refreshTokenIsRefused(rt), "without a DPoP proof glewlwyd refuses the bound refresh token")
    }
}
