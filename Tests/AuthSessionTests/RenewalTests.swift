import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@Suite("Silent renewal against the real authorization server", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RenewalTests {
    /// Signs in with short-lived access tokens, waits for expiry, then makes new ones long-lived.
    func expiredSession(_ f: SessionFixture, appleUserID: String = "user-renew") async throws {
        try f.server.configure(accessTokenTTL: 1)
        try await f.signIn(appleUserID: appleUserID)
        try f.server.configure(accessTokenTTL: 3600)
        try await Task.sleep(for: .milliseconds(1100))
    }

    @Test("a fresh cached token is served without a network call")
    func cacheHit() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        let before = try f.server.stats().tokenRequests
        let token = try await f.session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(token.source == .cache)
        #expect(try f.server.stats().tokenRequests == before)
    }

    @Test("rotation: the old refresh token is retired at the server and the store holds the new one")
    func rotation() async throws {
        let f = try SessionFixture()
        try await expiredSession(f)
        let old = try #require(try f.refreshToken())
        let token = try await f.session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(token.source == .network)
        let new = try #require(try f.refreshToken())
        #expect(new != old)
        let oldState = try f.server.introspect(old)
        #expect(oldState.active == false)
        #expect(oldState.reason == "rotated")
        #expect(try f.server.introspect(new).active)
        #expect(try f.store.ledger.cachedAccessTokens(account: "alice").first?.entry.token == token.token)
    }

    @Test("a server that does not rotate: the old refresh token is kept")
    func noRotation() async throws {
        let f = try SessionFixture()
        try f.server.configure(rotateRefreshTokens: false)
        try await expiredSession(f)
        let old = try #require(try f.refreshToken())
        let token = try await f.session.accessToken(for: "alice")
        #expect(token.source == .network)
        #expect(try f.refreshToken() == old)
        #expect(try f.server.introspect(old).active)
    }

    @Test("16 concurrent callers in one process share one network refresh")
    func singleFlightInProcess() async throws {
        let f = try SessionFixture()
        try await expiredSession(f)
        let before = try f.server.stats()
        let sources = try await withThrowingTaskGroup(of: AccessToken.Source.self) { group in
            for _ in 0..<16 {
                group.addTask { try await f.session.accessToken(for: "alice", scopes: ["read:items"]).source }
            }
            var sources: [AccessToken.Source] = []
            for try await source in group { sources.append(source) }
            return sources
        }
        let after = try f.server.stats()
        #expect(sources.count == 16)
        #expect(after.refreshGrants - before.refreshGrants == 1)
        #expect(after.reuseDetections == 0)
        #expect(sources.filter { $0 == .network }.count == 1)
    }

    @Test("4 processes × 4 callers share one network refresh; no reuse detection")
    func singleFlightAcrossProcesses() async throws {
        let f = try SessionFixture()
        try await expiredSession(f)
        let before = try f.server.stats()
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let results = ResultsBox()
        runAllAtOnce(4) { index in
            results.set(index, Result { try runChild(child, ["acquire", f.path, f.server.baseURL.absoluteString, "alice", "4"]) })
        }
        var lines: [String] = []
        for index in 0..<4 {
            let result = try results.get(index).get()
            #expect(result.status == 0, "\(result.stderr)")
            lines += result.stdout.split(separator: "\n").map(String.init)
        }
        let after = try f.server.stats()
        #expect(lines.count == 16)
        #expect(lines.allSatisfy { $0.hasPrefix("TOKEN") }, "\(lines)")
        #expect(after.refreshGrants - before.refreshGrants == 1)
        #expect(after.reuseDetections == 0)
        metric("single_flight_renewal", [
            "callers": 16, "processes": 4, "network_refreshes": after.refreshGrants - before.refreshGrants,
            "family_revocations": after.reuseDetections,
        ])
    }

    @Test("reuse of a rotated token revokes the family: interactionRequired, token no longer offered")
    func reuseDetection() async throws {
        let f = try SessionFixture()
        try await expiredSession(f, appleUserID: "user-reuse")
        let first = try #require(try f.refreshToken())
        _ = try await f.session.accessToken(for: "alice")
        // Someone presents the rotated token: the server revokes the whole family.
        let replay = try f.server.post(AuthorizationServer.tokenPath, form: [
            "grant_type": "refresh_token", "refresh_token": first, "client_id": AuthorizationServer.publicClientID,
        ])
        #expect(replay.status == 400)
        #expect(try f.server.stats().reuseDetections == 1)
        await expectAuthCode(.interactionRequired) {
            try await f.session.accessToken(for: "alice", forceRefresh: true)
        }
        #expect(try f.refreshToken() == nil)
        let requests = try f.server.stats().tokenRequests
        await expectAuthCode(.interactionRequired) {
            try await f.session.accessToken(for: "alice", forceRefresh: true)
        }
        #expect(try f.server.stats().tokenRequests == requests, "no retry loop")
        #expect(try f.store.credentialStateHistory(forUserID: "user-reuse").last?.reason == .refreshRejected)
    }

    @Test("mfa_required on a refresh: interactionRequired, and the refresh token is kept")
    func userMustActKeepsTheToken() async throws {
        let f = try SessionFixture()
        try await expiredSession(f, appleUserID: "user-mfa")
        let stored = try #require(try f.refreshToken())
        try f.server.inject(.status(
            403, path: AuthorizationServer.tokenPath,
            body: #"{"error":"mfa_required","error_description":"Multifactor authentication required"}"#))
        await expectAuthCode(.interactionRequired) {
            try await f.session.accessToken(for: "alice", forceRefresh: true)
        }
        #expect(try f.refreshToken() == stored, "not refused: the token stays")
        #expect(try f.store.credentialState(forUserID: "user-mfa") == .authorized)
        // Once the server stops asking, the same token renews.
        _ = try await f.session.accessToken(for: "alice", forceRefresh: true)
        #expect(try f.refreshToken() != nil)
    }

    @Test("declined scopes: returned on the token; serverDeclinedScopes with the right lists and the granted token when required")
    func declinedScopes() async throws {
        let f = try SessionFixture()
        try await expiredSession(f)
        try f.server.configure(declinedScopes: ["write:items"])
        let token = try await f.session.accessToken(for: "alice", scopes: ["read:items", "write:items"])
        #expect(token.declinedScopes == ["write:items"])
        do {
            _ = try await f.session.accessToken(
                for: "alice", scopes: ["read:items", "write:items"], requiringScopes: ["write:items"])
            Issue.record("expected serverDeclinedScopes")
        } catch let error as AuthSessionError {
            #expect(error.code == .serverDeclinedScopes)
            #expect(error.declinedScopes == ["write:items"])
            #expect(error.grantedScopes?.contains("read:items") == true)
            #expect(error.grantedAccessToken != nil)
        }
        let granted = try await f.session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(granted.source == .cache)
    }

    @Test("429 with Retry-After then success")
    func rateLimitedThenSuccess() async throws {
        let f = try SessionFixture()
        try await expiredSession(f)
        try f.server.inject(.status(429, path: AuthorizationServer.tokenPath, retryAfter: "1"))
        let start = ContinuousClock.now
        let token = try await f.session.accessToken(for: "alice")
        #expect(token.source == .network)
        #expect(ContinuousClock.now - start >= .seconds(1))
    }

    @Test("server down: notConnectedToInternet within the policy's bound; the token is kept")
    func serverDown() async throws {
        let log = SleepLog()
        let f = try SessionFixture(policy: log.recording(fastPolicy))
        try await expiredSession(f)
        let rt = try f.refreshToken()
        f.server.stopTemporarily()
        await expectAuthCode(.notConnectedToInternet) { try await f.session.accessToken(for: "alice") }
        // Within the policy's bound, as the policy applied it (wall time would measure the machine).
        #expect(log.sleeps.count == fastPolicy.maximumAttempts - 1, "\(log.sleeps)")
        #expect(log.total <= fastPolicy.maximumDelay * (fastPolicy.maximumAttempts - 1))
        #expect(try f.refreshToken() == rt)
    }

    @Test("no refresh token stored: interactionRequired")
    func noToken() async throws {
        let f = try SessionFixture()
        await expectAuthCode(.interactionRequired) { try await f.session.accessToken(for: "nobody") }
    }
}

final class ResultsBox: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var results: [Int: Result<ChildResult, any Error>] = [:]
    func set(_ index: Int, _ result: Result<ChildResult, any Error>) { lock.withLock { results[index] = result } }
    func get(_ index: Int) -> Result<ChildResult, any Error> { lock.withLock { results[index]! } }
}
