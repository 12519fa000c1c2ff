import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Findings 3 and 6 of the security review, against the real authorization server and keyring.
@Suite("Outbox hardening: flagged entries retried, unreadable rows skipped", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct OutboxHardeningTests {
    /// Finding 3: one 403 with an HTML body (a TLS-inspecting proxy's block page) flagged the
    /// entry as a permanent failure, and nothing ever tried it again: `resume` skipped it and a
    /// second logout repeated the flag, so the token stayed valid at the server for good.
    /// Before the fix the resume after the backoff made no request and `revoked` stayed 0.
    @Test("a proxy's 403 page flags the entry; resume before the backoff leaves it, after the backoff revokes it")
    func flaggedEntryRetriedAfterBackoff() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-portal")
        let rt = try #require(try f.refreshToken())
        try f.server.inject(.status(403, path: "/oauth/revoke", body: "<html>blocked</html>", contentType: "text/html"))
        let outcome = try await f.session.logout(account: "alice")
        guard case .revocationFailed = outcome else {
            Issue.record("expected revocationFailed, got \(outcome)")
            return
        }
        let flagged = try #require(try f.store.ledger.pendingRevocationList().entries.first)
        #expect(flagged.failureCode != nil)
        let wait = flagged.nextAttemptAt.timeIntervalSinceNow
        #expect(wait > 3000 && wait <= 3600, "a flagged entry waits about an hour, waited \(wait) s")

        // Before the backoff: neither a resume nor a second logout asks the server.
        let before = try f.server.stats().revokeRequests
        let early = try await f.session.resumePendingRevocations(includingNotDue: true)
        #expect(early.revoked == 0 && early.notDue == 1)
        #expect(try await f.session.logout(account: "alice") != .revoked)
        #expect(try f.server.stats().revokeRequests == before)

        // After it, an ordinary resume revokes it.
        let later = try await f.session.logoutCoordinator.resumePendingRevocations(now: Date() + 3601)
        #expect(later.revoked == 1, "\(later)")
        #expect(try f.server.stats().revokeRequests == before + 1)
        #expect(try f.server.introspect(rt).active == false)
        #expect(try f.store.ledger.pendingRevocationList().entries.isEmpty)
        #expect(try f.store.credentialState(forUserID: "user-portal") == .revoked)
        #expect(try f.store.credentialStateHistory(forUserID: "user-portal").last?.reason == .revocationConfirmed)
    }

    /// Finding 3, on demand: a captive portal's redirect flags the entry; `includingFailed`
    /// retries it at once. Before the fix no API tried a flagged entry again.
    @Test("a captive portal's redirect flags the entry; resume(includingFailed:) revokes it at once")
    func flaggedEntryRetriedOnDemand() async throws {
        let f = try SessionFixture()
        try await f.signIn(appleUserID: "user-redirect")
        let rt = try #require(try f.refreshToken())
        try f.server.inject(.redirect(to: "http://127.0.0.1:9/portal", path: "/oauth/revoke"))
        let outcome = try await f.session.logout(account: "alice")
        guard case .revocationFailed = outcome else {
            Issue.record("expected revocationFailed, got \(outcome)")
            return
        }
        let first = try await f.session.resumePendingRevocations(includingNotDue: true)
        #expect(first.revoked == 0)
        let report = try await f.session.resumePendingRevocations(includingFailed: true)
        #expect(report.revoked == 1, "\(report)")
        #expect(try f.server.introspect(rt).active == false)
        #expect(try f.store.credentialStateHistory(forUserID: "user-redirect").last?.reason == .revocationConfirmed)
        // The backoff doubles per attempt and stops at a day.
        #expect(LogoutCoordinator.failedRetryDelay(attempts: 0) == 3600)
        #expect(LogoutCoordinator.failedRetryDelay(attempts: 1) == 7200)
        #expect(LogoutCoordinator.failedRetryDelay(attempts: 40) == 86_400)
    }

    /// Finding 6: one flipped bit in one of two outbox entries made `resume` throw
    /// `integrityCheckFailed` before any request: the intact entry was never revoked either.
    @Test("a flipped bit in one of two entries: resume revokes the other, reports one unreadable; discard by id removes it")
    func damagedEntrySkipped() async throws {
        let f = try SessionFixture()
        try await f.signIn("alice", appleUserID: "user-good")
        try await f.signIn("bob", appleUserID: "user-damaged")
        let goodToken = try #require(try f.refreshToken("alice"))
        f.server.stopTemporarily()
        #expect(try await f.session.logout(account: "alice") == .revocationPending)
        #expect(try await f.session.logout(account: "bob") == .revocationPending)
        let entries = try f.store.ledger.pendingRevocationList().entries
        let damaged = try #require(entries.first { $0.account == "bob" })
        try flipBit(in: damaged.id, path: f.path)

        try f.server.restart()
        let before = try f.server.stats().revocations
        let report = try await f.session.resumePendingRevocations(includingNotDue: true)
        #expect(report.revoked == 1 && report.unreadable == 1, "\(report)")
        #expect(try f.server.stats().revocations == before + 1)
        #expect(try f.server.introspect(goodToken).active == false)
        let list = try f.store.ledger.pendingRevocationList()
        #expect(list.entries.isEmpty)
        #expect(list.unreadable.map(\.id) == [damaged.id])

        #expect(try f.store.ledger.discardUnreadablePendingRevocation(id: damaged.id))
        let after = try f.store.ledger.pendingRevocationList()
        #expect(after.entries.isEmpty && after.unreadable.isEmpty)
        #expect(try f.store.ledger.discardUnreadablePendingRevocation(id: damaged.id) == false)
        // Recorded, and the record itself verifies.
        let report2 = try f.store.verify()
        #expect(report2.isHealthy, "\(report2.badRows)")
        #expect(try f.server.stats().revocations == before + 1)
    }
}

/// Flips one bit in the middle of an outbox entry's sealed blob, through a second connection.
func flipBit(in entryID: String, path: String) throws {
    let raw = try Database(path: path)
    let id = try #require(Hex.decode(entryID))
    var sealed = try #require(try raw.firstRow("SELECT sealed FROM pending_revocations WHERE entry_id = ?", [.blob(id)]) { $0.blob(0) })
    sealed[sealed.count / 2] ^= 0x10
    try raw.run("UPDATE pending_revocations SET sealed = ? WHERE entry_id = ?", [.blob(sealed), .blob(id)])
}
