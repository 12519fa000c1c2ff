import FoundationEssentials

/// The logout outbox's rules, in one place: the states of an entry, the move a revocation
/// attempt makes, when an entry is due, the backoff, and the maintenance a logout-like
/// transaction leaves owed.
///
/// Values only, read at one instant (`now`): ``SessionLedger`` writes what they decide, in its
/// transactions, and `LogoutCoordinator` (AuthSession) does the I/O (the revocation request)
/// and serializes the calls per account.
///
/// ```
/// queued ──revoked──────────────▶ revoked    (the entry is deleted)
///    │  ──transient failure─────▶ pending(next)
///    │  ──refused for good──────▶ failed(code, next)   (kept, flagged, a late retry)
///    └──explicit discard────────▶ discarded  (deleted unrevoked, recorded in the history)
/// pending and failed move the same way when they are tried again.
/// ```
package struct Outbox: Sendable {
    /// The state of one outbox entry.
    package enum State: Equatable, Sendable {
        /// Queued, never tried: a logout tries it at once.
        case queued
        /// A transient failure: tried again from `next` on.
        case pending(next: Date)
        /// The server refused it for good (`code`); kept, flagged, and tried again from `next`
        /// on (a captive portal's page looks like a refusal).
        case failed(code: String, next: Date)
        /// The server revoked it (or never knew it): the entry is deleted.
        case revoked
        /// Given up on explicitly: the entry is deleted, its token not revoked.
        case discarded
    }

    /// What a logout-like transaction leaves for ``TokenStore/performOwedMaintenance()``.
    enum MaintenanceOwed: Equatable, Sendable {
        /// Nothing new (a rotation interrupted earlier may still be owed).
        case none
        /// The store holds no secret any more: a crypto-erase (a rotation to a new key) is owed.
        case cryptoErase
    }

    /// The instant the rules are read at.
    let now: Date

    /// The rules at `now`.
    package init(now: Date = Date()) {
        self.now = now
    }

    // MARK: States

    /// The state of a stored entry (a revoked or discarded one is no longer stored).
    package static func state(of entry: PendingRevocation) -> State {
        if let code = entry.failureCode { return .failed(code: code, next: entry.nextAttemptAt) }
        return entry.attempts > 0 ? .pending(next: entry.nextAttemptAt) : .queued
    }

    /// The state an entry is in after `result` is recorded.
    static func state(after result: RevocationAttemptResult) -> State {
        switch result {
        case .revoked: .revoked
        case .retryLater(_, let next): .pending(next: next)
        case .failedPermanently(let code, _, let next): .failed(code: code, next: next)
        }
    }

    // MARK: The due rule

    /// Whether the entry's next attempt time has come.
    package func isDue(_ entry: PendingRevocation) -> Bool {
        entry.nextAttemptAt <= now
    }

    /// Whether a logout of the entry's account tries it now: a queued entry always, a pending
    /// or flagged one once it is due (otherwise the logout reports its state).
    package func triesOnLogout(_ entry: PendingRevocation) -> Bool {
        Self.state(of: entry) == .queued || isDue(entry)
    }

    /// Whether a resume (at start-up, when the network returns) tries the entry: when it is
    /// due; `includingNotDue` tries every unflagged entry now, `includingFailed` every flagged one.
    package func triesOnResume(_ entry: PendingRevocation, includingNotDue: Bool, includingFailed: Bool) -> Bool {
        isDue(entry) || (entry.failureCode == nil ? includingNotDue : includingFailed)
    }

    // MARK: Backoff

    /// The result to record after a transient failure: tried again after `backoff(n)` plus a
    /// second, `n` being the attempts already made (at most 16), or after the server's
    /// `Retry-After` when that is later.
    package func retryLater(
        _ entry: PendingRevocation, error: String, retryAfter: Duration?, backoff: (Int) -> Duration
    ) -> RevocationAttemptResult {
        let delay = max(backoff(min(entry.attempts, Self.maxBackoffRetry)) + .seconds(1), retryAfter ?? .zero)
        return .retryLater(error: error, nextAttemptAt: now + delay.timeInterval)
    }

    /// The result to record after a refusal for good: flagged with `code`, tried again after
    /// ``failedRetryDelay(attempts:)``.
    package func failedPermanently(_ entry: PendingRevocation, code: String, error: String) -> RevocationAttemptResult {
        .failedPermanently(code: code, error: error, nextAttemptAt: now + Self.failedRetryDelay(attempts: entry.attempts))
    }

    /// The highest retry number a transient backoff is computed for.
    static let maxBackoffRetry = 16

    /// How long an entry the server refused for good waits before it is tried again: 1 hour,
    /// doubling with each attempt already made, at most 24 hours.
    package static func failedRetryDelay(attempts: Int) -> TimeInterval {
        min(24 * 3600, 3600 * Double(1 << min(max(attempts, 0), 5)))
    }

    // MARK: Recording

    /// Moves a stored schedule as `result` says (a revoked entry is deleted instead).
    static func apply(_ result: RevocationAttemptResult, to schedule: inout OutboxSchedule) {
        switch result {
        case .revoked:
            break
        case .retryLater(let error, let next):
            schedule.attempts += 1
            schedule.nextAttemptAt = Timestamp.millis(from: next)
            schedule.lastError = SessionLedger.clip(error)
        case .failedPermanently(let code, let error, let next):
            schedule.attempts += 1
            schedule.nextAttemptAt = Timestamp.millis(from: next)
            schedule.failedCode = SessionLedger.clip(code)
            schedule.lastError = SessionLedger.clip(error)
        }
    }

    /// The detail recorded with a user's `revoked` state when `result` settles the logout.
    static func detail(after result: RevocationAttemptResult) -> String? {
        switch result {
        case .revoked: nil
        case .retryLater: CredentialStateDetail.remoteRevocationPending
        case .failedPermanently: CredentialStateDetail.remoteRevocationFailed
        }
    }

    /// What a transaction that may have removed the store's last secret leaves owed.
    static func maintenanceOwed(holdsSecrets: Bool, rotatesKeyAfterLastLogout: Bool) -> MaintenanceOwed {
        rotatesKeyAfterLastLogout && !holdsSecrets ? .cryptoErase : .none
    }
}
