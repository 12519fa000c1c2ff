import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// A renewal under the userPresence policy reads the refresh token, so it asks polkit first.
/// Stand-in: python3-dbusmock's `polkitd` template on a private system bus (as in
/// TokenStoreTests' UserPresenceTests, which also run the real polkitd); the real authorization
/// server on loopback.
@Suite("Renewal under userPresence (dbusmock polkitd stand-in, real authorization server)", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct UserPresenceRenewalTests {
    static let authority = "/org/freedesktop/PolicyKit1/Authority"
    static let name = "org.freedesktop.PolicyKit1"

    /// Alice signed in, her access token expired (the next call renews), and dbusmock's polkitd
    /// on a private system bus.
    static func expiredSessionAndPolkit() async throws -> (SessionFixture, PrivateBus, DBusMock) {
        let f = try SessionFixture()
        try f.server.configure(accessTokenTTL: 1)
        try await f.signIn()
        try f.server.configure(accessTokenTTL: 3600)
        try await Task.sleep(for: .milliseconds(1100))
        let bus = try PrivateBus()
        return (f, bus, try DBusMock(template: "polkitd", name: name, bus: .system, environment: bus.environment))
    }

    @Test("denied: userPresenceDenied (retryable after the user acts), no request sent, the refresh token kept and still active; allowed: one check, then renewals within the window ask nothing")
    func renewalAsksFirst() async throws {
        let (f, bus, polkit) = try await Self.expiredSessionAndPolkit()
        func checks() throws -> Int {
            try polkit.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.GetMethodCalls", ["CheckAuthorization"])
                .components(separatedBy: "'unix-process'").count - 1
        }
        let before = try #require(try f.refreshToken())
        func refreshTokenUpdatedAt() throws -> Date? { try f.store.items().first { $0.key.kind == .refreshToken }?.updatedAt }
        let updatedBefore = try refreshTokenUpdatedAt()
        // From here the store records userPresence (a stronger policy asked at open is recorded): f.store follows it too.
        var options = TokenStore.Options(accessPolicy: .userPresence(.session(seconds: 300)))
        options.polkitBusAddress = bus.address
        let store = try TokenStore(path: f.path, appID: sessionAppID, options: options)
        let session = try SessionFixture.makeSession(store: store, server: f.server)
        let requests = try f.server.stats().tokenRequests

        do {
            _ = try await session.accessToken(for: "alice", scopes: ["read:items"])
            Issue.record("the renewal went on without the user's presence")
        } catch let error as AuthSessionError {
            #expect(storeCode(of: error) == .userPresenceDenied, "\(error)")
            #expect(error.isRetryableAfterUserAction)
        }
        #expect(try f.server.stats().tokenRequests == requests, "a request was sent")
        #expect(try refreshTokenUpdatedAt() == updatedBefore && updatedBefore != nil, "the refresh token was changed")
        #expect(try f.server.introspect(before).active)
        #expect(try checks() == 1)

        try polkit.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.SetAllowed", ["['\(sessionAppID).tokenstore.read']"])
        let token = try await session.accessToken(for: "alice", scopes: ["read:items"])
        #expect(token.source == .network)
        #expect(try f.server.introspect(before).active == false, "the renewal did not rotate the refresh token")
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        let count = try checks()
        metric("user_presence", ["policy": "session:300", "renewals": 3, "checks_after_denial": count - 1])
        #expect(count == 2, "renewals within the window asked again")
    }

    @Test("a renewal cancelled while polkit holds its check: the caller gets cancelled at once, polkit gets CancelCheckAuthorization with the check's cancellation id, no request is sent, the refresh token is kept and still active")
    func cancelledRenewalCancelsTheCheck() async throws {
        let (f, bus, polkit) = try await Self.expiredSessionAndPolkit()
        @discardableResult func mock(_ method: String, _ arguments: [String] = []) throws -> String {
            try polkit.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.\(method)", arguments)
        }
        func cancellationIDs(_ method: String) throws -> [String] {
            let out = try mock("GetMethodCalls", [method])
            let pattern = try NSRegularExpression(pattern: "'(tokenstore-[0-9]+-[0-9]+)'")
            return pattern.matches(in: out, range: NSRange(out.startIndex..., in: out)).map { String(out[Range($0.range(at: 1), in: out)!]) }
        }
        // Every check held unanswered (it would say yes); CancelCheckAuthorization recorded (the
        // template has none: added as a method that does nothing).
        try mock("SetAllowed", ["['\(sessionAppID).tokenstore.read']"])
        try mock("AddMethod", ["org.freedesktop.PolicyKit1.Authority", "CancelCheckAuthorization", "s", "", ""])
        try mock("SimulateHang", ["true"])
        let before = try #require(try f.refreshToken())
        // Metadata, not gated: f.store follows the userPresence policy recorded below.
        func refreshTokenUpdatedAt() throws -> Date? { try f.store.items().first { $0.key.kind == .refreshToken }?.updatedAt }
        let updatedBefore = try refreshTokenUpdatedAt()
        var options = TokenStore.Options(accessPolicy: .userPresence(.always))
        options.polkitBusAddress = bus.address
        options.userPresenceTimeout = .seconds(20)
        let store = try TokenStore(path: f.path, appID: sessionAppID, options: options)
        let session = try SessionFixture.makeSession(store: store, server: f.server)
        let requests = try f.server.stats().tokenRequests

        let renewal = Task { try await session.accessToken(for: "alice", scopes: ["read:items"]) }
        let deadline = ContinuousClock.now + .seconds(20)
        while try !mock("HaveHangingCalls").contains("true") {
            guard ContinuousClock.now < deadline else { Issue.record("the renewal did not ask polkit"); return }
            try await Task.sleep(for: .milliseconds(10))
        }
        renewal.cancel()
        do {
            _ = try await renewal.value
            Issue.record("the cancelled renewal returned a token")
        } catch let error as AuthSessionError {
            #expect(error.code == .cancelled, "\(error)")
        }
        // The renewal's read ends with the caller (not at the 20 s time-out): polkit is told.
        let asked = try cancellationIDs("CheckAuthorization")
        #expect(asked.count == 1)
        let told = ContinuousClock.now + .seconds(5)
        while try cancellationIDs("CancelCheckAuthorization").isEmpty, ContinuousClock.now < told {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try cancellationIDs("CancelCheckAuthorization") == asked, "polkit was not told to cancel the check it holds")
        #expect(try f.server.stats().tokenRequests == requests, "a request was sent")
        #expect(try refreshTokenUpdatedAt() == updatedBefore && updatedBefore != nil, "the refresh token was changed")
        #expect(try f.server.introspect(before).active)
    }
}
