import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@Suite("Sign-in and logout against the real authorization server", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SignInAndLogoutTests {
    @Test("sign-in stores the refresh token and Apple user id sealed; state authorized")
    func signIn() async throws {
        let f = try SessionFixture()
        let result = try await f.signIn(appleUserID: "000111.signin.user")
        #expect(result.accessToken.source == .signIn)
        #expect(result.idToken != nil)
        let rt = try #require(try f.refreshToken())
        #expect(try f.server.introspect(rt).active)
        #expect(try f.store.appleUserID(account: "alice") == "000111.signin.user")
        #expect(try f.store.credentialState(forUserID: "000111.signin.user") == .authorized)
        let cached = try #require(try f.store.ledger.cachedAccessTokens(account: "alice").first?.entry)
        #expect(cached.scopes.contains("read:items"))
        // Sealed: the raw file holds neither token nor user id.
        for suffix in ["", "-wal"] {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: f.path + suffix))
            #expect(bytes.range(of: Data(rt.utf8)) == nil)
            #expect(bytes.range(of: Data("000111.signin.user".utf8)) == nil)
        }
    }

    @Test("a bad or used authorization code is invalidGrant and stores nothing")
    func badCode() async throws {
        let f = try SessionFixture()
        await expectAuthCode(.invalidGrant) {
            try await f.session.signInWithApple(
                authorizationCode: SecretBytes(utf8: "not-a-real-code"), appleUserID: "u1", account: "alice")
        }
        let code = try f.server.appleAuthorizationCode(for: "u2")
        try await f.session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: "u2", account: "bob")
        await expectAuthCode(.invalidGrant) {
            try await f.session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: "u2", account: "carol")
        }
        // Refresh token, user id, ID token, profile (the access token is in the cache table).
        #expect(try f.store.counts().items == 4, "only bob's four items")
        #expect(try f.store.credentialState(forUserID: "u1") == .notFound)
    }

    @Test("signing in again over a live session revokes the replaced refresh token at the server")
    func signInOverLiveSession() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-first")
        let first = try #require(try f.refreshToken())
        // Another user over alice's session: a change the app allows (the default refuses it: userChanged).
        try await f.signIn(appleUserID: "user-second", allowsUserChange: true)
        let second = try #require(try f.refreshToken())
        #expect(first != second)
        #expect(try f.server.introspect(first).active == false, "the replaced token was revoked")
        #expect(try f.server.introspect(second).active)
        #expect(try f.store.pendingRevocations().isEmpty)
        #expect(try f.store.credentialState(forUserID: "user-first") == .revoked)
        #expect(try f.store.credentialState(forUserID: "user-second") == .authorized)
    }

    @Test("a sign-in over a live session tries the replaced token once and leaves other accounts' queue alone")
    func signInOverLiveSessionServerFailing() async throws {
        let log = SleepLog()
        let f = try SessionFixture(policy: log.recording(fastPolicy))
        // Bob's logout crashed after step 1: his token is queued and due.
        try await f.signIn("bob", appleUserID: "user-bob")
        let bobs = try #require(try f.refreshToken("bob"))
        _ = try f.store.ledger.beginLogout(account: "bob", reason: .userLogout)
        try await f.signIn(appleUserID: "user-first")
        let first = try #require(try f.refreshToken())
        let before = try f.server.stats().revokeRequests
        try f.server.inject(.status(503, path: AuthorizationServer.revokePath, count: 10))

        // Another user over alice's session: a change the app allows (the default refuses it: userChanged).
        try await f.signIn(appleUserID: "user-second", allowsUserChange: true)

        // One request, for the replaced token; no retry waited for; bob's entry not sent.
        #expect(try f.server.stats().revokeRequests - before == 1)
        #expect(log.sleeps.isEmpty, "the sign-in waited \(log.sleeps)")
        let pending = try f.store.pendingRevocations()
        #expect(Set(pending.map(\.account)) == ["alice", "bob"])
        #expect(pending.first { $0.account == "alice" }?.attempts == 1)
        #expect(pending.first { $0.account == "bob" }?.attempts == 0)
        #expect(try f.server.introspect(first).active, "not revoked yet: the server failed")
        #expect(try f.store.credentialState(forUserID: "user-second") == .authorized)

        // Start-up recovery sends both once the server works.
        try f.server.clearFaults()
        let report = try await f.session.logoutCoordinator.resumePendingRevocations(now: Date() + 3600)
        #expect(report.revoked == 2)
        #expect(try f.server.introspect(first).active == false)
        #expect(try f.server.introspect(bobs).active == false)
        #expect(try f.store.pendingRevocations().isEmpty)
    }

    @Test("bad names are refused before the Apple code is exchanged: the code stays usable")
    func badNamesBeforeTheExchange() async throws {
        let f = try SessionFixture()
        let code = try f.server.appleAuthorizationCode(for: "user-names")
        for (account, user) in [("", "user-names"), ("alice", ""), (String(repeating: "a", count: 5_000), "user-names")] {
            do {
                try await f.session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: user, account: AccountID(account))
                Issue.record("accepted a bad name")
            } catch let error as AuthSessionError {
                #expect(error.code == .storage && storeCode(of: error) == .invalidInput, "got \(error)")
            }
        }
        #expect(try f.server.stats().tokenRequests == 0, "the server was asked for tokens")
        try await f.session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: "user-names", account: "alice")
        #expect(try f.store.credentialState(forUserID: "user-names") == .authorized)
    }

    @Test("a sign-in the store cannot keep revokes the refresh token the server just issued")
    func unstoredSignInIsRevoked() async throws {
        let f = try SessionFixture()
        let code = try f.server.appleAuthorizationCode(for: "user-unstored")
        f.store.close()  // every store call now throws storeClosed
        do {
            try await f.session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: "user-unstored", account: "alice")
            Issue.record("a sign-in into a closed store succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .storage && storeCode(of: error) == .storeClosed, "got \(error)")
        }
        let stats = try f.server.stats()
        #expect(stats.exchangeGrants == 1 && stats.revokeRequests == 1)
        #expect(try f.server.revokeGrants(forAppleUserID: "user-unstored") == 0, "a token of the sign-in was still active")
    }

    @Test("a store error from a session call matches the store's pattern (catch TokenStoreError.storeClosed)")
    func storeErrorThroughSessionMatchesStorePattern() async throws {
        let f = try SessionFixture()
        try await f.signIn("alice")
        f.store.close()  // every store call now throws storeClosed
        var matched = "nothing thrown"
        do {
            _ = try await f.session.accessToken(for: "alice", scopes: ["openid"])
        } catch TokenStoreError.storeClosed {
            matched = "storeClosed"
        } catch {
            matched = "not matched: \(error)"
        }
        #expect(matched == "storeClosed")
        // The error itself is still the session layer's, with the store's error as its cause.
        let thrown = await #expect(throws: AuthSessionError.storage) {
            _ = try await f.session.accessToken(for: "alice", scopes: ["openid"])
        }
        #expect(thrown.flatMap { storeCode(of: $0) } == .storeClosed, "got \(String(describing: thrown))")
    }

    @Test("an access token the cache cannot hold (300 scopes): the refresh token is stored, the access token handed on")
    func uncacheableAccessToken() async throws {
        let f = try SessionFixture()
        let scopes = (0..<300).map { "s\($0)" }.joined(separator: " ")
        // A real ID token of the server for the user, so the sign-in's validation passes.
        let idToken = try #require(try f.server.signIn(appleUserID: "user-300").idToken)
        func answer(_ refreshToken: String) -> AuthorizationServer.Fault {
            .status(200, path: AuthorizationServer.tokenPath, body: #"""
                {"access_token":"at-\#(refreshToken)","refresh_token":"\#(refreshToken)","id_token":"\#(idToken)","token_type":"Bearer","expires_in":3600,"scope":"\#(scopes)"}
                """#, contentType: "application/json")
        }
        try f.server.inject(answer("rt-injected-1"))
        let result = try await f.signIn(appleUserID: "user-300")
        #expect(result.accessToken.token == SecretBytes(utf8: "at-rt-injected-1"))
        #expect(try f.refreshToken() == "rt-injected-1")
        #expect(try f.store.ledger.cachedAccessTokens(account: "alice").first?.entry == nil)
        // A renewal whose answer cannot be cached still keeps the rotated refresh token.
        try f.server.inject(answer("rt-injected-2"))
        let renewed = try await f.session.accessToken(for: "alice")
        #expect(renewed.token == SecretBytes(utf8: "at-rt-injected-2") && renewed.source == .network)
        #expect(try f.refreshToken() == "rt-injected-2")
        #expect(try f.store.ledger.cachedAccessTokens(account: "alice").first?.entry == nil)
    }

    @Test("logout revokes at the server, deletes the local entries, records revoked")
    func logout() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-logout")
        let rt = try #require(try f.refreshToken())
        let outcome = try await f.session.logout(account: "alice")
        #expect(outcome == .revoked)
        #expect(try f.server.introspect(rt).active == false)
        let refresh = try f.server.post(AuthorizationServer.tokenPath, form: [
            "grant_type": "refresh_token", "refresh_token": rt, "client_id": AuthorizationServer.publicClientID,
        ])
        #expect(refresh.status == 400)
        #expect(refresh.json?["error"] as? String == "invalid_grant")
        #expect(try f.store.counts().items == 0)
        #expect(try f.store.pendingRevocations().isEmpty)
        #expect(try f.store.credentialState(forUserID: "user-logout") == .revoked)
        let history = try f.store.credentialStateHistory(forUserID: "user-logout")
        #expect(history.map(\.reason) == [.signIn, .userLogout])
        #expect(history.last?.detail == nil)
        // Logging out again is a no-op with no network call.
        let before = try f.server.stats().revokeRequests
        #expect(try await f.session.logout(account: "alice") == .notFound)
        #expect(try f.server.stats().revokeRequests == before)
    }

    @Test("logout of an account with nothing stored is notFound with no network call")
    func logoutNothing() async throws {
        let f = try SessionFixture()
        #expect(try await f.session.logout(account: "nobody") == .notFound)
        #expect(try f.server.stats().revokeRequests == 0)
    }

    @Test("429 with Retry-After: 2 then 200: waited at least 2 s, then revoked")
    func retryAfterHonoured() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        try f.server.inject(.status(429, path: AuthorizationServer.revokePath, retryAfter: "2"))
        let start = ContinuousClock.now
        let outcome = try await f.session.logout(account: "alice")
        let waited = ContinuousClock.now - start
        #expect(outcome == .revoked)
        #expect(waited >= .seconds(2), "waited \(waited)")
        #expect(try f.server.stats().revokeRequests == 2)
    }

    @Test("a huge Retry-After is capped: no long sleep, the entry waits at most the cap")
    func hugeRetryAfterCapped() async throws {
        let log = SleepLog()
        let f = try SessionFixture(policy: log.recording(fastPolicy))
        try await f.signIn()
        try f.server.inject(.status(429, path: AuthorizationServer.revokePath, count: 10, retryAfter: "999999"))
        let outcome = try await f.session.logout(account: "alice")
        // No wait at all: a server delay above the cap ends the call at once (the entry is scheduled instead).
        #expect(log.sleeps.isEmpty, "the policy waited \(log.sleeps)")
        #expect(try f.server.stats().revokeRequests == 1)
        #expect(outcome == .revocationPending)
        let entry = try #require(try f.store.pendingRevocations().first)
        #expect(entry.nextAttemptAt.timeIntervalSinceNow <= fastPolicy.maximumRetryAfter.seconds + 2)
    }

    @Test("401 invalid_client: revocationFailed(invalidClient), entry kept and flagged")
    func invalidClient() async throws {
        let f = try SessionFixture(clientID: AuthorizationServer.confidentialClientID, clientSecret: "wrong-secret")
        let tokens = try f.server.signIn(
            appleUserID: "user-401", clientID: AuthorizationServer.confidentialClientID,
            clientSecret: AuthorizationServer.confidentialClientSecret)
        try f.store.ledger.saveSignIn(
            account: "alice", refreshToken: SecretBytes(utf8: try #require(tokens.refreshToken)), appleUserID: "user-401",
            accessToken: nil)
        let outcome = try await f.session.logout(account: "alice")
        #expect(outcome == .revocationFailed(.invalidClient))
        let entries = try f.store.pendingRevocations()
        #expect(entries.count == 1)
        #expect(entries.first?.failureCode == AuthSessionError.Code.invalidClient.rawValue)
        #expect(try f.store.refreshToken(account: "alice") == nil)
        #expect(try f.store.credentialState(forUserID: "user-401") == .revoked)
        #expect(try f.store.credentialStateHistory(forUserID: "user-401").last?.detail == CredentialStateDetail.remoteRevocationFailed)
        // A permanently failed entry is not retried by resume; discarding it is explicit and recorded.
        #expect(try await f.session.logoutCoordinator.resumePendingRevocations().revoked == 0)
        #expect(try await f.session.logoutCoordinator.discardPendingRevocations(account: "alice") == 1)
        #expect(try f.store.pendingRevocations().isEmpty)
        #expect(try f.store.credentialStateHistory(forUserID: "user-401").last?.reason == .revocationDiscarded)
    }

    @Test("server down: pending at once, outbox survives 5 process restarts, revoked once back")
    func offlineLogout() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-offline")
        let rt = try #require(try f.refreshToken())
        f.server.stopTemporarily()
        let outcome = try await f.session.logout(account: "alice")
        #expect(outcome == .revocationPending)
        // The app sees the user logged out at once.
        #expect(try f.store.refreshToken(account: "alice") == nil)
        #expect(try f.store.ledger.cachedAccessTokens(account: "alice").first?.entry == nil)
        #expect(try f.store.appleUserID(account: "alice") == nil)
        #expect(try f.store.credentialState(forUserID: "user-offline") == .revoked)
        #expect(try f.store.credentialStateHistory(forUserID: "user-offline").last?.detail == CredentialStateDetail.remoteRevocationPending)
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let restarts = 5
        var lost = 0
        for _ in 0..<restarts {
            let result = try runChild(child, ["pending", f.path])
            #expect(result.status == 0, "\(result.stderr)")
            if result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != "PENDING 1" { lost += 1 }
            // Resume while the server is still down changes nothing.
            let resumed = try runChild(child, ["resume", f.path, f.server.baseURL.absoluteString])
            #expect(resumed.status == 0, "\(resumed.stderr)")
        }
        try f.server.restart()
        #expect(try f.server.introspect(rt).active, "still active until revoked")
        let report = try await f.session.logoutCoordinator.resumePendingRevocations(now: Date() + 3600)
        #expect(report.revoked == 1)
        #expect(try f.store.pendingRevocations().isEmpty)
        #expect(try f.server.introspect(rt).active == false)
        #expect(try f.store.credentialStateHistory(forUserID: "user-offline").last?.reason == .revocationConfirmed)
        #expect(lost == 0)
        metric("offline_logout", ["restarts": restarts, "outbox_entries_lost": lost])
    }

    @Test("Apple revocation relayed by the app runs the same clean-up with reason appleRevoked")
    func appleRevoked() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-apple")
        let rt = try #require(try f.refreshToken())
        let outcomes = try await f.session.logoutCoordinator.handleAppleCredentialRevoked(userID: "user-apple")
        #expect(outcomes == [.revoked])
        #expect(try f.server.introspect(rt).active == false)
        #expect(try f.store.credentialStateHistory(forUserID: "user-apple").last?.reason == .appleRevoked)
        _ = try await f.session.logoutCoordinator.handleAppleCredentialRevoked(userID: "never-seen")
        #expect(try f.store.credentialState(forUserID: "never-seen") == .revoked)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
