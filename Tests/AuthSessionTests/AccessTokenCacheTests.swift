import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// The one session object (issue 14): access tokens per audience and scope set from one
/// refresh token (Auth0's Multi-Resource Refresh Tokens), the minimum-TTL guard, forced
/// renewal, declined scopes returned, accounts, and clearing without revoking — against the
/// real authorization server, which records each access token's audience.
@Suite("Access tokens per audience, minimum TTL, forced renewal, accounts", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct AccessTokenCacheTests {
    static let apiA = "https://notes.example.com/"
    static let apiB = "https://photos.example.com/"

    @Test("two audiences: two cached tokens, each served from the cache on a second call; a refresh for A leaves B valid")
    func twoAudiences() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-mrrt")
        let a = try await f.session.accessToken(for: "alice", audience: Self.apiA, scopes: ["read:items"])
        let b = try await f.session.accessToken(for: "alice", audience: Self.apiB, scopes: ["read:items"])
        #expect(a.source == .network && b.source == .network)
        #expect(a.audience == Self.apiA && b.audience == Self.apiB)
        #expect(try f.server.introspect(try #require(a.token.stringValue())).audience == Self.apiA)
        #expect(try f.server.introspect(try #require(b.token.stringValue())).audience == Self.apiB)
        let refreshes = try f.server.stats().refreshGrants
        #expect(refreshes == 2)

        // Second calls: both from the cache, no refresh at all.
        let a2 = try await f.session.accessToken(for: "alice", audience: Self.apiA, scopes: ["read:items"])
        let b2 = try await f.session.accessToken(for: "alice", audience: Self.apiB, scopes: ["read:items"])
        #expect(a2.source == .cache && a2.token == a.token)
        #expect(b2.source == .cache && b2.token == b.token)
        #expect(try f.server.stats().refreshGrants == refreshes)
        #expect(try f.session.hasValidAccessToken(for: "alice", audience: Self.apiA, scopes: ["read:items"]))

        // A forced refresh for A: exactly one refresh; the rotated refresh token and A's new token
        // are stored, and B's cached token is still served and still valid at the server.
        let a3 = try await f.session.renew(account: "alice", audience: Self.apiA, scopes: ["read:items"])
        #expect(a3.source == .network && a3.token != a.token)
        #expect(try f.server.stats().refreshGrants == refreshes + 1)
        let b3 = try await f.session.accessToken(for: "alice", audience: Self.apiB, scopes: ["read:items"])
        #expect(b3.source == .cache && b3.token == b.token)
        #expect(try f.server.introspect(try #require(b.token.stringValue())).active)
        #expect(try f.server.stats().refreshGrants == refreshes + 1)

        let account = try #require(try f.session.accounts().first)
        #expect(Set(account.cachedTokens.map(\.audience)) == [nil, Self.apiA, Self.apiB])
    }

    @Test("the audience of the configuration is the default; a sign-in's own token is cached under it")
    func configurationAudience() async throws {
        let f = try SessionFixture()
        let configuration = try AuthorizationServerConfiguration(
            domain: f.server.baseURL, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5),
            audience: Self.apiA)
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        let code = try f.server.appleAuthorizationCode(for: "user-default-aud")
        let signIn = try await session.signInWithApple(authorizationCode: SecretBytes(utf8: code), account: "alice", scopes: ["read:items"])
        #expect(signIn.accessToken.audience == Self.apiA)
        #expect(try f.server.introspect(try #require(signIn.accessToken.token.stringValue())).audience == Self.apiA)
        let token = try await session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(token.source == .cache && token.token == signIn.accessToken.token)
    }

    @Test("a minimum TTL beyond the tokens' lifetime: minimumTTLTooLarge after exactly one refresh; the next call does not refresh")
    func minimumTTLTooLarge() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-minttl")
        try f.server.configure(accessTokenTTL: 600)
        let before = try f.server.stats().refreshGrants
        for call in 0..<3 {
            do {
                _ = try await f.session.accessToken(for: "alice", audience: Self.apiA, minimumTTL: .seconds(3600))
                Issue.record("call \(call): no error")
            } catch let error as AuthSessionError {
                #expect(error.code == .minimumTTLTooLarge, "call \(call): \(error)")
                let lifetime = try #require(error.tokenLifetime)
                #expect(lifetime > .seconds(590) && lifetime <= .seconds(601), "call \(call): \(lifetime)")
            }
            // One refresh in all: after the first, the cached token shows no refresh can help.
            #expect(try f.server.stats().refreshGrants == before + 1, "call \(call)")
        }
        // A minimum TTL the tokens can meet is served from the cache.
        let token = try await f.session.accessToken(for: "alice", audience: Self.apiA, minimumTTL: .seconds(60))
        #expect(token.source == .cache)
        #expect(try f.server.stats().refreshGrants == before + 1)
    }

    @Test("forceRefresh: exactly one refresh per call, the rotated refresh token stored")
    func forceRefresh() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-force")
        let old = try #require(try f.refreshToken())
        let before = try f.server.stats().refreshGrants
        let token = try await f.session.accessToken(for: "alice", scopes: ["read:items"], forceRefresh: true)
        #expect(token.source == .network)
        #expect(try f.server.stats().refreshGrants == before + 1)
        #expect(try f.refreshToken() != old)
        #expect(try !f.server.introspect(old).active)
        #expect(try f.session.canRenew(account: "alice"))
        #expect(try !f.session.canRenew(account: "nobody"))
    }

    @Test("declined scopes are returned on sign-in and on renewal alike; requiringScopes throws with the granted token")
    func declinedScopes() async throws {
        let f = try SessionFixture()
        // The test server grants only the scopes it knows: "admin:all" is declined at sign-in.
        let signIn = try await f.signIn(appleUserID: "user-declined", scopes: ["openid", "read:items", "write:items", "admin:all"])
        #expect(signIn.declinedScopes == ["admin:all"])
        #expect(signIn.accessToken.declinedScopes == ["admin:all"])

        try f.server.configure(declinedScopes: ["write:items"])
        let renewed = try await f.session.accessToken(for: "alice", audience: Self.apiA, scopes: ["read:items", "write:items"])
        #expect(renewed.source == .network)
        #expect(renewed.declinedScopes == ["write:items"])
        #expect(renewed.grantedScopes.contains("read:items") && !renewed.grantedScopes.contains("write:items"))
        // Cached with its declined scopes: the second call says the same, from the cache.
        let again = try await f.session.accessToken(for: "alice", audience: Self.apiA, scopes: ["read:items", "write:items"])
        #expect(again.source == .cache && again.declinedScopes == ["write:items"])

        do {
            _ = try await f.session.accessToken(
                for: "alice", audience: Self.apiA, scopes: ["read:items", "write:items"], requiringScopes: ["write:items"])
            Issue.record("no error")
        } catch let error as AuthSessionError {
            #expect(error.code == .serverDeclinedScopes)
            #expect(error.declinedScopes == ["write:items"])
            #expect(error.grantedAccessToken?.token == renewed.token)
        }
    }

    @Test("no expires_in: expiresAt is nil and the token is never served from the cache")
    func noExpiry() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-noexp")
        let rt = try #require(try f.refreshToken())
        try f.server.inject(.status(200, path: AuthorizationServer.tokenPath, body: #"""
            {"access_token":"at-without-expiry","refresh_token":"\#(rt)-next","token_type":"Bearer","scope":"openid read:items"}
            """#, contentType: "application/json"))
        let token = try await f.session.accessToken(for: "alice", audience: Self.apiB, scopes: ["read:items"])
        #expect(token.expiresAt == nil)
        #expect(!token.isValid())
        #expect(token.authorizationHeaderValue() == "Bearer at-without-expiry")
        #expect(try f.refreshToken() == rt + "-next")
        #expect(try !f.session.hasValidAccessToken(for: "alice", audience: Self.apiB, scopes: ["read:items"]))
    }

    @Test("the cache keeps at most 16 tokens per account, evicting the oldest; a key rotation keeps them")
    func boundedAndRotated() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-bound")
        let audiences = (0..<18).map { "https://api\($0).example.com/" }
        for audience in audiences { _ = try await f.session.accessToken(for: "alice", audience: audience) }
        let cached = try #require(try f.session.accounts().first).cachedTokens
        #expect(cached.count == 16)
        #expect(!cached.contains { $0.audience == audiences[0] || $0.audience == audiences[1] })
        #expect(cached.first?.audience == audiences[17])

        _ = try f.store.rotateDataKey()
        #expect(try f.store.verify().isHealthy)
        let before = try f.server.stats().refreshGrants
        let token = try await f.session.accessToken(for: "alice", audience: audiences[17])
        #expect(token.source == .cache)
        #expect(try f.server.stats().refreshGrants == before)
    }

    @Test("accounts after two sign-ins and one logout; clearLocally removes local entries, leaves the server's token active, and says so in the history")
    func accountsAndClear() async throws {
        let f = try SessionFixture()
        try await f.signIn("alice", appleUserID: "user-acc-a")
        try await f.signIn("bob", appleUserID: "user-acc-b")
        var accounts = try f.session.accounts()
        #expect(accounts.map(\.account.name) == ["alice", "bob"])
        #expect(accounts.map(\.userID) == ["user-acc-a", "user-acc-b"])
        #expect(accounts.allSatisfy { $0.state == .authorized && $0.canRenew && !$0.isLoggingOut })

        #expect(try await f.session.logout(account: "alice") == .revoked)
        accounts = try f.session.accounts()
        #expect(accounts.map(\.account.name) == ["bob"])
        #expect(try f.session.credentialState(forUserID: "user-acc-a") == .revoked)

        let rt = try #require(try f.refreshToken("bob"))
        let revocations = try f.server.stats().revocations
        #expect(try await f.session.clearLocally(account: "bob"))
        #expect(try f.session.accounts().isEmpty)
        #expect(try f.store.items().isEmpty)
        #expect(try f.session.userProfile(account: "bob") == nil)
        // Not revoked: the server still honours the token, and nothing was sent.
        #expect(try f.server.introspect(rt).active)
        #expect(try f.server.stats().revocations == revocations)
        let last = try #require(try f.session.credentialStateHistory(forUserID: "user-acc-b").last)
        #expect(last.to == .revoked && last.reason == .clearedLocally && last.detail == CredentialStateDetail.notRevokedAtServer)
        #expect(try await !f.session.clearLocally(account: "bob"))
    }
}
