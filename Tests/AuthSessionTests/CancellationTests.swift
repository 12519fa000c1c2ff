import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// Task cancellation of every long session call: it ends without waiting for the server (the
/// server holds the request for seconds, and has not answered it when the call has returned), with
/// a typed `cancelled` (or, for a logout, the durable outcome of an offline one), and changes
/// nothing it should not. The time from `cancel()` to the call's end is a METRIC (a speed figure,
/// 1–10 ms on a quiet machine): what fails the test is the order of events, not the clock.
@Suite("Cancellation", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct CancellationTests {
    /// Starts `body`, waits until `ready()` holds (the call is under way), cancels it and
    /// returns its result with the time from the cancel to its end, in milliseconds.
    private func cancelWhen<T: Sendable>(
        _ ready: @escaping () throws -> Bool, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> (result: Result<T, any Error>, millis: Double) {
        let task = Task { try await body() }
        let deadline = ContinuousClock.now + .seconds(30)
        while try !ready() {
            guard ContinuousClock.now < deadline else { throw PrivateKeyringError("the call never got under way") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let start = ContinuousClock.now
        task.cancel()
        let result = await task.result
        let elapsed = ContinuousClock.now - start
        return (result, Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
    }

    private func expectCancelled<T>(_ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation) {
        switch result {
        case .success: Issue.record("the cancelled call succeeded", sourceLocation: sourceLocation)
        case .failure(let error): #expect((error as? AuthSessionError)?.code == .cancelled, "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("a browser sign-in waiting for the redirect: the listener closes at once, nothing is stored")
    func signInWaiting() async throws {
        let f = try SessionFixture()
        var latencies: [Double] = []
        for _ in 0..<5 {
            let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
            let port = UInt16(redirect[0].port!)
            let opened = RecordingOpener()
            let (result, millis) = try await cancelWhen({ !opened.urls.isEmpty }) {
                try await f.session.signIn(account: "alice", redirectURIs: redirect, browser: opened)
            }
            expectCancelled(result)
            #expect(BrowserSignInTests.isFree(port), "the listener's port is still taken once the call returned")
            latencies.append(millis)
        }
        try BrowserSignInTests.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
        latencies.sort()
        metric("cancel_sign_in_waiting", ["runs": latencies.count, "median_ms": latencies[2], "max_ms": latencies[4]])
        // Nothing else would end the call for minutes (the redirect's time-out): ending within
        // seconds is ending on the cancel. How fast is the METRIC above.
        #expect(latencies[4] <= 5_000, "max \(latencies[4]) ms")
    }

    @Test("a browser sign-in in its code exchange: nothing is stored")
    func signInExchanging() async throws {
        let f = try SessionFixture()
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        try f.server.inject(.delay(3, path: AuthorizationServer.tokenPath))
        let (result, millis) = try await cancelWhen({ try f.server.stats().tokenRequests >= 1 }) {
            try await f.session.signIn(
                account: "alice", redirectURIs: redirect, browser: LoginHintOpener(user: AuthorizationServer.defaultAppleUserID))
        }
        expectCancelled(result)
        metric("cancel_sign_in_exchanging", ["ms": String(format: "%.1f", millis)])
        #expect(try f.server.stats().codeGrants == 0, "the call waited for the server's answer (\(millis) ms)")
        try BrowserSignInTests.expectNothingStored(f, userID: AuthorizationServer.defaultAppleUserID)
    }

    @Test("a renewal: the caller is released at once; the refresh under way still stores its rotated token")
    func renewal() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        let before = try f.refreshToken()
        let stats = try f.server.stats()
        try f.server.inject(.delay(2, path: AuthorizationServer.tokenPath))
        let (result, millis) = try await cancelWhen({ try f.server.stats().tokenRequests > stats.tokenRequests }) {
            try await f.session.accessToken(for: "alice", forceRefresh: true)
        }
        expectCancelled(result)
        metric("cancel_renewal", ["ms": String(format: "%.1f", millis)])
        #expect(try f.server.stats().refreshGrants == stats.refreshGrants, "the call waited for the server's answer (\(millis) ms)")
        // The server rotated the refresh token when it answered; the store must hold the new one,
        // or the next renewal would present a used token (reuse detection signs the user out).
        let deadline = ContinuousClock.now + .seconds(20)
        while try f.refreshToken() == before, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(try f.refreshToken() != before)
        _ = try await f.session.accessToken(for: "alice", forceRefresh: true)
        let after = try f.server.stats()
        #expect(after.refreshGrants == stats.refreshGrants + 2 && after.reuseDetections == 0, "\(after)")
    }

    @Test("a logout waiting on the server, or between its retries: logged out here, revocation queued, not flagged")
    func logout() async throws {
        for fault in [AuthorizationServer.Fault.delay(3, path: AuthorizationServer.revokePath),
                      .status(503, path: AuthorizationServer.revokePath, retryAfter: "3")] {
            let f = try SessionFixture()
            try await f.signIn()
            try f.server.inject(fault)
            let answered = fault.delay == nil
            let (result, millis) = try await cancelWhen({
                let stats = try f.server.stats()
                return stats.revokeRequests >= 1 && (!answered || stats.pendingFaults == 0)
            }) {
                try await f.session.logout(account: "alice")
            }
            #expect(try result.get() == .revocationPending)
            metric("cancel_logout", ["fault": answered ? "503_retry_after" : "delay", "ms": String(format: "%.1f", millis)])
            let afterCancel = try f.server.stats()
            // Not waited for: the held revocation (delay) or the retry after Retry-After (503).
            #expect(afterCancel.revocations == 0 && afterCancel.revokeRequests == 1, "\(afterCancel), \(millis) ms")
            #expect(try f.refreshToken() == nil)
            let pending = try f.session.pendingRevocations()
            #expect(pending.count == 1 && pending.first?.failureCode == nil, "\(pending)")
            let report = try await f.session.resumePendingRevocations(includingNotDue: true)
            #expect(report.revoked == 1, "\(report)")
        }
    }

    @Test("resuming the outbox: ends with cancelled, the entries not tried keep their schedule")
    func resume() async throws {
        let f = try SessionFixture()
        try await f.signIn("alice", appleUserID: "000792.cancel.resume.a")
        try await f.signIn("bob", appleUserID: "000792.cancel.resume.b")
        try f.server.inject(.status(503, path: AuthorizationServer.revokePath, count: 6))
        for account in ["alice", "bob"] { #expect(try await f.session.logout(account: AccountID(account)) == .revocationPending) }
        let before = try f.session.pendingRevocations()
        let requests = try f.server.stats().revokeRequests
        try f.server.inject(.delay(3, path: AuthorizationServer.revokePath))
        let (result, millis) = try await cancelWhen({ try f.server.stats().revokeRequests > requests }) {
            try await f.session.resumePendingRevocations(includingNotDue: true)
        }
        expectCancelled(result)
        metric("cancel_resume", ["ms": String(format: "%.1f", millis)])
        #expect(try f.server.stats().revocations == 0, "the call waited for the server's answer (\(millis) ms)")
        let after = try f.session.pendingRevocations()
        #expect(after.count == 2)
        // The entry that was under way recorded its attempt; the other one was not touched.
        let untouched = after.filter { entry in before.contains { $0.id == entry.id && $0.attempts == entry.attempts } }
        #expect(untouched.count == 1, "before \(before.map(\.attempts)), after \(after.map(\.attempts))")
        #expect(try f.server.stats().revokeRequests == requests + 1)
    }
}
