@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// The device authorization grant (RFC 8628) through ``TokenSession/signInWithDevice(account:scopes:audience:allowsUserChange:usesDPoP:onUserCode:)``
/// against the test server (Tests/AuthServer: `/oauth/device/code`, the device_code grant; the
/// test approves or denies the user code through `/__test/device` while the session polls, as
/// the user would on another device), the real keyring and SQLite. No browser anywhere.
@Suite("Device sign-in (RFC 8628) against the test server", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DeviceSignInTests {
    /// What `onUserCode` received, for the test to act on.
    final class CodeBox: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var codes: [DeviceAuthorization] = []
        func add(_ code: DeviceAuthorization) { lock.withLock { codes.append(code) } }
        var all: [DeviceAuthorization] { lock.withLock { codes } }

        /// Waits for the first code (the session hands it over before its first poll); rethrows
        /// the sign-in's error when it ends first.
        func first<T: Sendable>(of signIn: Task<T, any Error>, within limit: Duration = .seconds(60)) async throws -> DeviceAuthorization {
            let finished = Finished()
            Task { _ = try? await signIn.value; finished.set() }
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if let code = all.first { return code }
                if finished.isSet {
                    _ = try await signIn.value
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw NoCode()
        }
    }

    struct NoCode: Error {}

    final class Finished: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    static func discoverySession(_ f: SessionFixture, dpop: Bool = false) throws -> TokenSession {
        var configuration = try AuthorizationServerConfiguration(
            issuer: f.server.issuer, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.usesDPoP = dpop
        return TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
    }

    /// The server's record of the device code whose user code is `userCode`.
    static func record(_ f: SessionFixture, _ userCode: String) throws -> [String: Any] {
        let codes = try f.server.device()["codes"] as? [[String: Any]] ?? []
        return try #require(codes.first { $0["user_code"] as? String == userCode })
    }

    /// Waits until the server saw `count` polls of `userCode`.
    static func waitForPolls(_ f: SessionFixture, _ userCode: String, count: Int, within limit: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if (try record(f, userCode)["polls"] as? [Double] ?? []).count >= count { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("fewer than \(count) polls of the device code")
    }

    @Test("Auth0's /oauth/device/code: the user code and URIs handed over, polls until the test approves, everything stored and bound")
    func approvedWhilePolling() async throws {
        let f = try SessionFixture()
        let codes = CodeBox()
        let session = f.session
        let signIn = Task { try await session.signInWithDevice(account: "alice", scopes: ["openid", "read:items"], onUserCode: codes.add) }
        let code = try await codes.first(of: signIn)
        #expect(code.verificationURI.absoluteString == f.server.issuer + "activate")
        #expect(code.verificationURIComplete?.absoluteString == f.server.issuer + "activate?user_code=" + code.userCode)
        #expect(code.interval == .seconds(1))
        #expect(code.expiresAt > Date().addingTimeInterval(500))
        #expect(try f.store.refreshToken(account: "alice") == nil, "nothing stored while waiting")
        try await Self.waitForPolls(f, code.userCode, count: 2)
        try f.server.device(["approve": code.userCode, "apple_id": "001122.device.user"])
        let result = try await signIn.value
        #expect(codes.all.count == 1, "onUserCode is called once")
        #expect(result.profile.userID == "001122.device.user")
        #expect(result.accessToken.grantedScopes.contains("read:items"))
        #expect(try f.store.credentialState(forUserID: "001122.device.user") == .authorized)
        let rt = try #require(try f.refreshToken())
        #expect(try f.server.introspect(rt).active)
        let endpoints = try #require(try f.store.boundRefreshToken(account: "alice")?.endpoints)
        #expect(endpoints.token == f.server.tokenURL.absoluteString, "the refresh token is bound to the endpoints that issued it")
        #expect(try f.server.counter("device_grants") == 1)
        #expect(try f.server.counter("device_too_early_polls") == 0, "every poll waited its interval")
        // The session goes on like any other: the cached token, then a refresh.
        #expect(try await session.accessToken(for: "alice", scopes: ["read:items"]).source == .cache)
        #expect(try await session.renew(account: "alice", scopes: ["read:items"]).source == .network)
    }

    @Test("slow_down adds 5 s to the interval: the next poll waits 6 s, and no poll comes early")
    func slowDownRaisesTheInterval() async throws {
        let f = try SessionFixture()
        let codes = CodeBox()
        try f.server.device(["slow_down": 1])
        let session = f.session
        let signIn = Task { try await session.signInWithDevice(account: "alice", onUserCode: codes.add) }
        let code = try await codes.first(of: signIn)
        try await Self.waitForPolls(f, code.userCode, count: 2, within: .seconds(30))
        try f.server.device(["approve": code.userCode])
        _ = try await signIn.value
        let polls = try Self.record(f, code.userCode)["polls"] as? [Double] ?? []
        #expect(polls.count >= 2)
        let gap = polls[1] - polls[0]
        metric("device_slow_down", ["gap_s": String(format: "%.2f", gap), "polls": polls.count])
        #expect(gap >= 5.9, "the poll after slow_down waited interval + 5 s (\(gap) s)")
        #expect(try f.server.counter("device_too_early_polls") == 0)
    }

    @Test("the user declines: authorizationFailed (access_denied), nothing stored")
    func denied() async throws {
        let f = try SessionFixture()
        let codes = CodeBox()
        let session = f.session
        let signIn = Task { try await session.signInWithDevice(account: "alice", onUserCode: codes.add) }
        let code = try await codes.first(of: signIn)
        try f.server.device(["deny": code.userCode])
        do {
            _ = try await signIn.value
            Issue.record("a declined device sign-in succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .authorizationFailed && error.oauthError == "access_denied", "\(error)")
        }
        #expect(try f.store.refreshToken(account: "alice") == nil)
        #expect(try f.server.counter("device_grants") == 0)
    }

    @Test("the code expires: timedOut, by the server's expired_token and by the code's own expires_in")
    func expired() async throws {
        let f = try SessionFixture()
        let session = f.session
        let codes = CodeBox()
        let signIn = Task { try await session.signInWithDevice(account: "alice", onUserCode: codes.add) }
        try f.server.device(["expire": try await codes.first(of: signIn).userCode])
        do {
            _ = try await signIn.value
            Issue.record("an expired device code signed in")
        } catch let error as AuthSessionError {
            #expect(error.code == .timedOut && error.oauthError == "expired_token", "\(error)")
        }
        // A code that lives 2 s and that nobody approves: the session stops at its expiry.
        try f.server.device(["expires_in": 2])
        let start = ContinuousClock.now
        await expectAuthCode(.timedOut) { try await session.signInWithDevice(account: "alice", onUserCode: { _ in }) }
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(try f.store.refreshToken(account: "alice") == nil)
    }

    @Test("cancelling the task ends the wait at once: cancelled, nothing stored")
    func cancelled() async throws {
        let f = try SessionFixture()
        try f.server.device(["interval": 30])
        let codes = CodeBox()
        let session = f.session
        let signIn = Task { try await session.signInWithDevice(account: "alice", onUserCode: codes.add) }
        _ = try await codes.first(of: signIn)
        let start = ContinuousClock.now
        signIn.cancel()
        do {
            _ = try await signIn.value
            Issue.record("a cancelled device sign-in succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .cancelled, "\(error)")
        }
        #expect(ContinuousClock.now - start < .seconds(5), "the 30 s wait was cut short")
        #expect(try f.store.refreshToken(account: "alice") == nil)
    }

    @Test("by discovery (device_authorization_endpoint), DPoP-bound: dpop_jkt names our key, the tokens are bound to it")
    func discoveryAndDPoP() async throws {
        let f = try SessionFixture()
        let session = try Self.discoverySession(f, dpop: true)
        let codes = CodeBox()
        let signIn = Task { try await session.signInWithDevice(account: "alice", scopes: ["openid", "read:items"], onUserCode: codes.add) }
        let code = try await codes.first(of: signIn)
        try f.server.device(["approve": code.userCode])
        let result = try await signIn.value
        let jkt = try #require(try await DPoPKeys.load(store: f.store)).thumbprint
        #expect(try Self.record(f, code.userCode)["dpop_jkt"] as? String == jkt, "the device authorization named our key")
        #expect(result.accessToken.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(result.accessToken.token.stringValue())).jkt == jkt)
        #expect(try f.server.introspect(#require(try f.refreshToken())).jkt == jkt)
        #expect(try f.store.dpopBinding(account: "alice") == jkt)
    }

    @Test("a server without a device_authorization_endpoint: unsupportedByServer before any request")
    func unsupported() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("okta")  // its discovery document names no device endpoint
        let configuration = try AuthorizationServerConfiguration(
            issuer: f.server.baseURL.absoluteString + "/oauth2/default", clientID: AuthorizationServer.publicClientID,
            requestTimeout: .seconds(5))
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        await expectAuthCode(.unsupportedByServer) {
            try await session.signInWithDevice(account: "alice", onUserCode: { _ in Issue.record("no code expected") })
        }
        #expect(try f.server.counter("device_authorizations") == 0)
    }
}
