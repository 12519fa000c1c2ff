@testable import AuthSession
import Foundation
import Testing
import TestSupport
import TestTraits
@testable import TokenStore

/// DPoP (RFC 9449) through ``TokenSession`` (issue 27 items 3 and 5) against the real test
/// server (nonce required, refresh tokens bound to the key) and the real keyring and SQLite.
@Suite("DPoP sessions: bound sign-in, refresh, revoke, nonces shared, key loss", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPSessionTests {
    /// A session over `store` whose sign-ins are DPoP-bound (`bound: false`: a plain one, as a
    /// later process that never asks for DPoP).
    static func session(_ f: SessionFixture, store: TokenStore? = nil, bound: Bool = true) throws -> TokenSession {
        var configuration = try AuthorizationServerConfiguration(
            domain: f.server.baseURL, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.usesDPoP = bound
        return TokenSession(store: store ?? f.store, configuration: configuration, retryPolicy: fastPolicy)
    }

    @discardableResult
    static func signIn(_ f: SessionFixture, _ session: TokenSession, appleUserID: String = "apple-dpop-s1") async throws -> SignInResult {
        let code = try f.server.appleAuthorizationCode(for: appleUserID)
        return try await session.signInWithApple(
            authorizationCode: SecretBytes(utf8: code), appleUserID: appleUserID, account: "alice", scopes: ["openid", "read:items"])
    }

    static func thumbprint(_ store: TokenStore) async throws -> String {
        try #require(try await DPoPKeys.load(store: store)).thumbprint
    }

    @Test("sign-in, refresh and revoke DPoP-bound: token_type DPoP, cnf.jkt our thumbprint, the cache says DPoP too")
    func boundSignInRefreshRevoke() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        let signIn = try await Self.signIn(f, session)
        let jkt = try await Self.thumbprint(f.store)
        #expect(signIn.accessToken.tokenType == "DPoP")
        #expect(signIn.accessToken.authorizationHeaderValue().hasPrefix("DPoP "))
        #expect(try f.server.introspect(#require(signIn.accessToken.token.stringValue())).jkt == jkt)
        #expect(try f.store.dpopBinding(account: "alice") == jkt)
        let cached = try await session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(cached.source == .cache && cached.tokenType == "DPoP", "the cache keeps the token type")
        let renewed = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(renewed.source == .network && renewed.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(renewed.token.stringValue())).jkt == jkt)
        let rt = try #require(try f.refreshToken())
        #expect(try f.server.introspect(rt).jkt == jkt, "the refresh token's family is bound to our key")
        #expect(try await session.logout(account: "alice") == .revoked)
        #expect(try f.server.introspect(rt).active == false)
        #expect(try f.store.dpopBinding(account: "alice") == nil, "the logout drops the account's binding")
        #expect(try await Self.thumbprint(f.store) == jkt, "one key per store: it stays for the next sign-in")
        // A Bearer session of the same store stays Bearer.
        let plain = try Self.session(f, bound: false)
        let bearer = try await Self.signIn(f, plain, appleUserID: "apple-dpop-s1b")
        #expect(bearer.accessToken.tokenType == "Bearer" && bearer.accessToken.authorizationHeaderValue().hasPrefix("Bearer "))
        #expect(try f.store.dpopBinding(account: "alice") == nil)
    }

    @Test("the resource-server proof: ath of the current token, htu without query; /userinfo accepts it")
    func resourceServerProof() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        let token = try await Self.signIn(f, session).accessToken
        let raw = try #require(token.token.stringValue())
        let url = URL(string: f.server.baseURL.absoluteString + "/userinfo?x=1#frag")!
        let proof = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        let verdict = try f.server.checkDPoPProof(proof, method: "GET", url: url.absoluteString, accessToken: raw)
        #expect(verdict.error == nil, "\(verdict.description ?? "")")
        #expect(verdict.jkt == (try await Self.thumbprint(f.store)))
        #expect(verdict.claims["ath"] as? String == DPoPProof.accessTokenHash(raw))
        #expect(verdict.claims["htu"] as? String == f.server.baseURL.absoluteString + "/userinfo")
        // A wrong ath is the server's refusal, not ours: the same proof checked against another token fails.
        let other = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        let wrong = try f.server.checkDPoPProof(other, method: "GET", url: url.absoluteString, accessToken: raw + "x")
        #expect(wrong.error != nil)
        let fresh = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        #expect(try f.server.userinfoStatus(authorization: token.authorizationHeaderValue(), dpop: fresh) == 200)
        await expectAuthCode(.insecureConfiguration) {
            try await session.dpopProof(method: "GET", url: URL(string: "ftp://example.com/x")!, accessToken: token)
        }
    }

    @Test("an API that asks for a nonce (RFC 9449 9): recorded from its 401, the next proof has it, so do another open's and the token endpoint's")
    func resourceServerNonce() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        let token = try await Self.signIn(f, session).accessToken
        let authorization = token.authorizationHeaderValue()
        let url = URL(string: f.server.baseURL.absoluteString + "/userinfo")!
        try f.server.dpop(["resource_nonce": true, "rotate_nonce": true])  // the nonce the session has is stale now
        let refused = try f.server.userinfo(
            authorization: authorization, dpop: try await session.dpopProof(method: "GET", url: url, accessToken: token))
        #expect(refused.status == 401)
        let nonce = try #require(refused.dpopNonce, "the resource server's 401 carries DPoP-Nonce")
        try await session.recordDPoPNonce(nonce, for: url)
        let retried = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        #expect(try f.server.userinfo(authorization: authorization, dpop: retried).status == 200)
        // Another process of the store starts with it (sealed in the store).
        let second = try TokenStore(path: f.path, appID: sessionAppID)
        let later = try Self.session(f, store: second, bound: false)
        let elsewhere = try await later.dpopProof(method: "GET", url: url, accessToken: token)
        #expect(try f.server.userinfo(authorization: authorization, dpop: elsewhere).status == 200)
        // The API and the token endpoint here are one origin: the refresh sends it, no challenge.
        let challenges = try f.server.counter("dpop_nonce_challenges")
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(try f.server.counter("dpop_nonce_challenges") == challenges, "the refresh paid a use_dpop_nonce")
        // What is not a nonce is refused and changes nothing.
        for bad in ["", "has space", "quote\"", "back\\slash", String(repeating: "n", count: 1025)] {
            await expectAuthCode(.invalidRequest) { try await session.recordDPoPNonce(bad, for: url) }
        }
        await expectAuthCode(.insecureConfiguration) {
            try await session.recordDPoPNonce("n", for: URL(string: "ftp://example.com/x")!)
        }
        #expect(try second.dpopNonce(origin: DPoPBinding.origin(url)) == nonce)
    }

    @Test("the nonce is shared through the store: a second open (another session, no DPoP asked) pays no use_dpop_nonce")
    func nonceSharedBetweenOpens() async throws {
        let f = try SessionFixture()
        try await Self.signIn(f, try Self.session(f))
        #expect(try f.server.counter("dpop_nonce_challenges") == 1, "the sign-in's first proof had no nonce")
        let second = try TokenStore(path: f.path, appID: sessionAppID)
        let later = try Self.session(f, store: second, bound: false)
        let renewed = try await later.renew(account: "alice", scopes: ["read:items"])
        #expect(renewed.tokenType == "DPoP", "the account's binding is used by itself")
        #expect(try f.server.counter("dpop_nonce_challenges") == 1, "the second open sent the stored nonce: no 400")
        #expect(try f.server.counter("refresh_grants") == 1)
    }

    @Test("single flight across the nonce retry: 8 callers, a rotated nonce, one refresh at the server; fresh jti each proof")
    func singleFlightAcrossNonceRetry() async throws {
        let f = try SessionFixture()
        try f.server.configure(accessTokenTTL: 1)
        let session = try Self.session(f)
        try await Self.signIn(f, session)
        try f.server.configure(accessTokenTTL: 3600)
        try await Task.sleep(for: .milliseconds(1100))
        try f.server.dpop(["rotate_nonce": true])
        let types = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await session.accessToken(for: "alice", scopes: ["read:items"]).tokenType } }
            var types: [String] = []
            for try await type in group { types.append(type) }
            return types
        }
        #expect(types == Array(repeating: "DPoP", count: 8))
        #expect(try f.server.counter("refresh_grants") == 1, "one renewal, one refresh")
        #expect(try f.server.counter("dpop_nonce_challenges") == 2, "the sign-in's and the rotated nonce's")
        #expect(try f.server.counter("dpop_invalid_proofs") == 0, "no proof reused a jti, the retry's included")
        #expect(try f.server.stats().reuseDetections == 0)
    }

    @Test("a second use_dpop_nonce in a row: a typed error, nothing consumed or cleared; the next call works")
    func secondNonceAnswerLeavesSessionUsable() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        try await Self.signIn(f, session)
        let rt = try #require(try f.refreshToken())
        try f.server.dpop(["reject_next": 2])
        await expectAuthCode(.invalidRequest) { try await session.renew(account: "alice", scopes: ["read:items"]) }
        #expect(try f.server.counter("refresh_grants") == 0)
        #expect(try f.refreshToken() == rt && (try f.store.dpopBinding(account: "alice")) != nil, "nothing cleared")
        #expect(try f.server.introspect(rt).active)
        #expect(try await session.renew(account: "alice", scopes: ["read:items"]).tokenType == "DPoP")
    }

    @Test("a stale iat is refused by the server: typed error, the session stays; a later proof works")
    func staleIssuedAtRefused() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        try await Self.signIn(f, session)
        let rt = try #require(try f.refreshToken())
        try f.server.dpop(["iat_window": 0.000001])
        // iat has whole seconds: it is off the server's clock by more than a microsecond
        let refused = await #expect(throws: AuthSessionError.self) { try await session.renew(account: "alice", scopes: ["read:items"]) }
        #expect(refused?.code != .dpopKeyLost && refused?.code != nil)
        #expect(try f.server.counter("dpop_invalid_proofs") >= 1)
        #expect(try f.refreshToken() == rt)
        try f.server.dpop(["iat_window": 60])
        #expect(try await session.renew(account: "alice", scopes: ["read:items"]).tokenType == "DPoP")
    }

    @Test("a stolen refresh token without the key, or with another key, is refused by the server")
    func stolenRefreshTokenRefused() async throws {
        let f = try SessionFixture()
        let session = try Self.session(f)
        try await Self.signIn(f, session)
        let rt = try #require(try f.refreshToken())
        let bearer = try AuthorizationServerClient(
            configuration: AuthorizationServerConfiguration(domain: f.server.baseURL, clientID: AuthorizationServer.publicClientID),
            retryPolicy: fastPolicy)
        await expectAuthCode(.interactionRequired) { try await bearer.refresh(SecretBytes(utf8: rt), scopes: ["openid"]) }
        let thief = bearer.withDPoP(DPoPBinding(key: try DPoPKey.generate()))
        await expectAuthCode(.interactionRequired) { try await thief.refresh(SecretBytes(utf8: rt), scopes: ["openid"]) }
        #expect(try f.server.counter("dpop_key_mismatches") == 2)
        #expect(try f.server.introspect(rt).active, "the holder's session is untouched")
        #expect(try await session.renew(account: "alice", scopes: ["read:items"]).tokenType == "DPoP")
    }

    @Test("key loss: the key row deleted, or changed to another key -> dpopKeyLost and the session cleared locally")
    func keyLossClearsSession() async throws {
        for change in ["delete", "replace"] {
            let f = try SessionFixture()
            let session = try Self.session(f)
            try await Self.signIn(f, session)
            try f.store.connection.write { db, envelope in
                if change == "delete" {
                    try DPoPStateRecord.delete(db, .key, envelope: envelope)
                } else {
                    let other = try DPoPKey.generate()
                    let material = SecretBytes(try other.privateScalar() + other.publicPoint)
                    try DPoPStateRecord.upsert(db, .key, secret: material, residence: "software", envelope: envelope)
                }
            }
            let before = try f.server.counter("token_requests")
            let later = try Self.session(f, bound: false)  // a new process: no binding in memory
            await expectAuthCode(.dpopKeyLost) { try await later.renew(account: "alice", scopes: ["read:items"]) }
            #expect(try f.server.counter("token_requests") == before, "\(change): no request with a new key")
            #expect(try f.refreshToken() == nil, "\(change): the session is cleared")
            #expect(try f.store.dpopBinding(account: "alice") == nil)
            #expect(try f.store.credentialState(forUserID: "apple-dpop-s1") == .revoked)
        }
    }
}
