import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// The logout rules of `Outbox`, as values: each state and move, the due rule, the backoff
/// bounds, and the maintenance a logout-like transaction leaves owed. Pure: no store, no server
/// (the suites that drive them through a store and the test server are OutboxHardeningTests,
/// SignInAndLogoutTests and StateMachineTests).
@Suite("Outbox rules: states, due rule, backoff, maintenance owed", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct OutboxRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func entry(attempts: Int = 0, next: Date? = nil, failureCode: String? = nil) -> PendingRevocation {
        PendingRevocation(
            id: String(repeating: "ab", count: 16), account: "alice", appleUserID: "000101.a.apple",
            refreshToken: SecretBytes(utf8: "RT-ONE"), reason: .userLogout, endpoints: nil, attempts: attempts,
            nextAttemptAt: next ?? now, lastError: nil, failureCode: failureCode, createdAt: now)
    }

    @Test("a stored entry is queued, pending(next) or failed(code, next)")
    func statesOfStoredEntries() {
        let later = now + 60
        #expect(Outbox.state(of: entry()) == .queued)
        #expect(Outbox.state(of: entry(attempts: 2, next: later)) == .pending(next: later))
        #expect(Outbox.state(of: entry(attempts: 1, next: later, failureCode: "invalidClient"))
            == .failed(code: "invalidClient", next: later))
        // Flagged wins over attempts (a flagged entry has been tried).
        #expect(Outbox.state(of: entry(attempts: 0, next: later, failureCode: "x")) == .failed(code: "x", next: later))
    }

    @Test("each attempt result moves the entry: revoked, pending(next), failed(code, next)")
    func movesAfterAnAttempt() {
        let next = now + 30
        #expect(Outbox.state(after: .revoked) == .revoked)
        #expect(Outbox.state(after: .retryLater(error: "network", nextAttemptAt: next)) == .pending(next: next))
        #expect(Outbox.state(after: .failedPermanently(code: "invalidClient", error: "e", nextAttemptAt: next))
            == .failed(code: "invalidClient", next: next))
        #expect(Outbox.detail(after: .revoked) == nil)
        #expect(Outbox.detail(after: .retryLater(error: "e", nextAttemptAt: next)) == CredentialStateDetail.remoteRevocationPending)
        #expect(Outbox.detail(after: .failedPermanently(code: "c", error: "e", nextAttemptAt: next))
            == CredentialStateDetail.remoteRevocationFailed)
    }

    @Test("the stored schedule moves as the result says; a revoked entry's schedule is left (the row is deleted)")
    func scheduleMoves() {
        let created = Timestamp.millis(from: now)
        var schedule = OutboxSchedule(attempts: 3, nextAttemptAt: created, lastError: nil, failedCode: nil, createdAt: created)
        Outbox.apply(.revoked, to: &schedule)
        #expect(schedule.attempts == 3 && schedule.failedCode == nil && schedule.lastError == nil)
        Outbox.apply(.retryLater(error: "network\u{7}", nextAttemptAt: now + 10), to: &schedule)
        #expect(schedule.attempts == 4 && schedule.nextAttemptAt == created + 10_000)
        #expect(schedule.lastError == "network", "control characters are clipped")
        #expect(schedule.failedCode == nil)
        Outbox.apply(.failedPermanently(code: "invalidClient", error: String(repeating: "e", count: 500), nextAttemptAt: now + 20), to: &schedule)
        #expect(schedule.attempts == 5 && schedule.nextAttemptAt == created + 20_000)
        #expect(schedule.failedCode == "invalidClient" && schedule.lastError?.count == 200)
        #expect(schedule.createdAt == created)
    }

    @Test("due rule: due when the next attempt time has come; a logout always tries a queued entry; a resume widens with its flags")
    func dueRule() {
        let outbox = Outbox(now: now)
        let later = now + 60
        #expect(outbox.isDue(entry(next: now)))
        #expect(outbox.isDue(entry(next: now - 1)))
        #expect(!outbox.isDue(entry(next: later)))

        #expect(outbox.triesOnLogout(entry(next: later)), "a queued entry (never tried) is tried by a logout")
        #expect(!outbox.triesOnLogout(entry(attempts: 1, next: later)), "pending, not due")
        #expect(outbox.triesOnLogout(entry(attempts: 1, next: now)), "pending, due")
        #expect(!outbox.triesOnLogout(entry(attempts: 1, next: later, failureCode: "c")), "flagged, not due")
        #expect(outbox.triesOnLogout(entry(attempts: 1, next: now - 1, failureCode: "c")), "flagged, due")

        let pending = entry(attempts: 1, next: later)
        let flagged = entry(attempts: 1, next: later, failureCode: "c")
        #expect(!outbox.triesOnResume(pending, includingNotDue: false, includingFailed: false))
        #expect(outbox.triesOnResume(pending, includingNotDue: true, includingFailed: false))
        #expect(!outbox.triesOnResume(pending, includingNotDue: false, includingFailed: true))
        #expect(!outbox.triesOnResume(flagged, includingNotDue: true, includingFailed: false))
        #expect(outbox.triesOnResume(flagged, includingNotDue: false, includingFailed: true))
        #expect(outbox.triesOnResume(entry(attempts: 1, next: now), includingNotDue: false, includingFailed: false))
    }

    @Test("backoff bounds: transient = backoff(min(attempts, 16)) + 1 s, or Retry-After when later; flagged = 1 h doubling, at most 24 h")
    func backoffBounds() {
        let outbox = Outbox(now: now)
        var asked: [Int] = []
        let backoff: (Int) -> Duration = { n in
            asked.append(n)
            return .seconds(2 * n)
        }
        func next(_ result: RevocationAttemptResult) -> Date? {
            if case .retryLater(_, let next) = result { return next }
            return nil
        }
        #expect(next(outbox.retryLater(entry(attempts: 0), error: "e", retryAfter: nil, backoff: backoff)) == now + 1)
        #expect(next(outbox.retryLater(entry(attempts: 3), error: "e", retryAfter: nil, backoff: backoff)) == now + 7)
        #expect(next(outbox.retryLater(entry(attempts: 400), error: "e", retryAfter: nil, backoff: backoff)) == now + 33)
        #expect(asked == [0, 3, 16], "the retry number is capped at \(Outbox.maxBackoffRetry)")
        #expect(next(outbox.retryLater(entry(attempts: 3), error: "e", retryAfter: .seconds(120), backoff: backoff)) == now + 120)
        #expect(next(outbox.retryLater(entry(attempts: 3), error: "e", retryAfter: .seconds(2), backoff: backoff)) == now + 7)

        #expect(Outbox.failedRetryDelay(attempts: -3) == 3600)
        #expect(Outbox.failedRetryDelay(attempts: 0) == 3600)
        #expect(Outbox.failedRetryDelay(attempts: 1) == 7200)
        #expect(Outbox.failedRetryDelay(attempts: 4) == 16 * 3600)
        #expect(Outbox.failedRetryDelay(attempts: 5) == 24 * 3600)
        #expect(Outbox.failedRetryDelay(attempts: 1_000) == 24 * 3600)
        guard case .failedPermanently(let code, let error, let at) = outbox.failedPermanently(entry(attempts: 2), code: "c", error: "e")
        else {
            Issue.record("not a permanent failure")
            return
        }
        #expect(code == "c" && error == "e" && at == now + 4 * 3600)
    }

    @Test("maintenance owed: a crypto-erase once no secret is left, unless turned off")
    func maintenanceOwed() {
        #expect(Outbox.maintenanceOwed(holdsSecrets: false, rotatesKeyAfterLastLogout: true) == .cryptoErase)
        #expect(Outbox.maintenanceOwed(holdsSecrets: true, rotatesKeyAfterLastLogout: true) == Outbox.MaintenanceOwed.none)
        #expect(Outbox.maintenanceOwed(holdsSecrets: false, rotatesKeyAfterLastLogout: false) == Outbox.MaintenanceOwed.none)
        #expect(Outbox.maintenanceOwed(holdsSecrets: true, rotatesKeyAfterLastLogout: false) == Outbox.MaintenanceOwed.none)
    }
}
