import FoundationEssentials
import TokenStore

/// Logs users out in the order Apple's guide asks — revoke the refresh token at the
/// authorization server, then delete the local entries, then record the credential state —
/// made durable, so that being offline or crashing loses nothing:
///
/// 1. One transaction: the account is marked as logging out and its refresh token moves to
///    the pending-revocation outbox; no read offers it any more. Nothing else is deleted.
/// 2. `POST /oauth/revoke`.
/// 3. One transaction: on success the outbox entry, the Apple user id and the cached access
///    token are deleted and the user recorded `revoked`; on a transient failure the local
///    entries go and the entry stays queued (``LogoutOutcome/revocationPending``); on a
///    permanent failure the entry is kept and flagged (``LogoutOutcome/revocationFailed(_:)``).
///
/// A crash at any point leaves a state from which ``resumePendingRevocations(now:includingNotDue:includingFailed:)`` (call it at
/// start-up and when the network returns) finishes the job. A refresh token is always the
/// account's, in the outbox, or revoked at the server — never deleted unrevoked, except by
/// an explicit, recorded ``discardPendingRevocations(account:service:)``.
///
/// Logouts of different accounts run at once; operations on one account are serialized.
package actor LogoutCoordinator {
    package let store: TokenStore
    package let client: AuthorizationServerClient
    let logger: TokenStoreLogger
    private let serializer = KeyedSerializer()

    package init(store: TokenStore, client: AuthorizationServerClient, logger: TokenStoreLogger = .disabled) {
        self.store = store
        self.client = client
        self.logger = logger
    }

    /// Logs `account` out. See the type's documentation for the steps.
    ///
    /// A cancellation ends the revocation request (or the wait between its retries) at once;
    /// the account is logged out here all the same and its revocation queued, as offline
    /// (``LogoutOutcome/revocationPending``).
    ///
    /// A second logout of the same account reports the current state: pending entries that
    /// are due (flagged ones too, once their long backoff is over) are tried again, others are
    /// left alone.
    /// - Throws: ``AuthSessionError`` with code `storage` when the store fails (nothing is lost:
    ///   the steps already done are durable).
    package func logout(
        account: AccountID, reason: CredentialStateReason = .userLogout
    ) async throws -> LogoutOutcome {
        try await withOwedMaintenance {
            try await self.serializer.run(account) { try await self.performLogout(account: account, reason: reason) }
        }
    }

    /// Retries the due outbox entries and reports what happened. Call at start-up and when the
    /// network returns.
    ///
    /// An entry is due when its next attempt time has come (the rules: `Outbox`): a transient
    /// failure backs off with jitter, an entry the server refused for good (flagged) waits
    /// ``failedRetryDelay(attempts:)`` — hours, since a captive portal or a proxy's block page
    /// looks like a permanent refusal. `includingNotDue` tries every unflagged entry now,
    /// `includingFailed` every flagged one.
    /// A row that does not open is skipped and counted in ``RevocationReport/unreadable``: the
    /// others are still revoked.
    package func resumePendingRevocations(
        now: Date = Date(), includingNotDue: Bool = false, includingFailed: Bool = false
    ) async throws -> RevocationReport {
        try await withOwedMaintenance {
            try await self.resume(now: now, includingNotDue: includingNotDue, includingFailed: includingFailed)
        }
    }

    private func resume(now: Date, includingNotDue: Bool, includingFailed: Bool) async throws -> RevocationReport {
        var report = RevocationReport()
        let list = try await StoreWork.blocking { try self.store.ledger.pendingRevocationList() }
        report.unreadable = list.unreadable.count
        let outbox = Outbox(now: now)
        for entry in list.entries {
            if Task.isCancelled {
                throw AuthSessionError(.cancelled, "Resuming the pending revocations was cancelled; the entries not tried stay queued as they were.")
            }
            guard outbox.triesOnResume(entry, includingNotDue: includingNotDue, includingFailed: includingFailed) else {
                report.notDue += 1
                continue
            }
            do {
                let outcome = try await serializer.run(entry.account) {
                    try await self.attempt(entry, using: self.client)
                }
                report.count(outcome)
            } catch let error as AuthSessionError where Self.isIntegrityFailure(error) {
                // Its schedule was altered since it was listed: skip it like an unreadable row.
                report.unreadable += 1
            }
        }
        logger.info("resumed pending revocations", metadata: ["revoke.report": report.description])
        return report
    }

    /// Tries the due outbox entries of one account once each, with no retry, and reports what
    /// happened. For a caller that has just queued a refresh token and must not be held up by a
    /// failing server: a sign-in that replaced a live session, a renewal that lost to a logout.
    /// What is not revoked stays queued; other accounts' entries are left to
    /// ``resumePendingRevocations(now:includingNotDue:includingFailed:)``.
    func revokeQueuedOnce(account: AccountID, now: Date = Date()) async throws -> RevocationReport {
        try await serializer.run(account) {
            var report = RevocationReport()
            // Read inside the account's turn: a logout that ran meanwhile may have settled some.
            let list = try await StoreWork.blocking { try self.store.ledger.pendingRevocationList() }
            let entries = list.entries.filter { $0.account == account }
            let client = self.client.withoutRetries
            let outbox = Outbox(now: now)
            for entry in entries {
                guard outbox.isDue(entry) else {
                    report.notDue += 1
                    continue
                }
                report.count(try await self.attempt(entry, using: client))
            }
            return report
        }
    }

    /// How long an entry the server refused for good waits before it is tried again: 1 hour,
    /// doubling with each attempt already made, at most 24 hours (`Outbox`'s rule).
    package static func failedRetryDelay(attempts: Int) -> TimeInterval {
        Outbox.failedRetryDelay(attempts: attempts)
    }

    static func isIntegrityFailure(_ error: AuthSessionError) -> Bool {
        (error.underlyingError as? TokenStoreError)?.code == .integrityCheckFailed
    }

    /// The app learned from Apple (relayed by its backend: consent revoked, account deleted)
    /// that the user withdrew: every account with this Apple user id is logged out with reason
    /// `appleRevoked`, and the user is recorded `revoked` even if no account is stored.
    package func handleAppleCredentialRevoked(userID: String) async throws -> [LogoutOutcome] {
        let accounts = try await StoreWork.blocking { try self.store.accounts(forAppleUserID: userID) }
        var outcomes: [LogoutOutcome] = []
        for account in accounts {
            outcomes.append(try await logout(account: account, reason: .appleRevoked))
        }
        try await StoreWork.blocking {
            if try self.store.credentialState(forUserID: userID) != .revoked {
                try self.store.recordCredentialState(.revoked, forUserID: userID, reason: .appleRevoked)
            }
        }
        return outcomes
    }

    /// Gives up on the account's pending revocations explicitly; recorded in the history.
    /// - Warning: the refresh tokens may still be valid at the server.
    /// - Returns: how many entries were discarded.
    @discardableResult
    package func discardPendingRevocations(account: AccountID) async throws -> Int {
        try await withOwedMaintenance {
            try await self.serializer.run(account) {
                try await StoreWork.blocking {
                    // A damaged row of another account must not keep this one's from being discarded.
                    let entries = try self.store.ledger.pendingRevocationList().entries.filter { $0.account == account }
                    for entry in entries { try self.store.ledger.discardPendingRevocation(entry) }
                    return entries.count
                }
            }
        }
    }

    /// Removes the account's local entries without revoking anything (see
    /// `TokenSession.clearLocally(account:)`), then runs the owed maintenance.
    /// - Returns: whether anything was removed.
    package func clearLocally(account: AccountID) async throws -> Bool {
        try await withOwedMaintenance { try await StoreWork.blocking { try self.store.ledger.clearLocally(account: account) } }
    }

    /// "Transaction, then maintenance" for the session (the store's synchronous form is
    /// `TokenStore.withOwedMaintenance(when:_:)`): runs `transaction`, then what the store owes
    /// after it — the crypto-erase once the last account is gone, a key rotation that may talk
    /// to the Secret Service for seconds — off this actor, so logouts of other accounts are not
    /// held up. A failure of the maintenance is logged; it stays owed and runs at the next open.
    private func withOwedMaintenance<T: Sendable>(_ transaction: () async throws -> T) async throws -> T {
        let value = try await transaction()
        // A cancelled caller is not held up by it: it stays owed for the next call or open.
        if !Task.isCancelled { await performOwedMaintenance() }
        return value
    }

    nonisolated private func performOwedMaintenance() async {
        if let error = (try? await store.onBlockingExecutor { $0.owedMaintenanceError() }) ?? nil {
            logger.info("owed maintenance could not run now", metadata: ["error": (error as? TokenStoreError)?.code.rawValue ?? "unexpected"])
        }
    }

    // MARK: Steps

    private func performLogout(account: AccountID, reason: CredentialStateReason) async throws -> LogoutOutcome {
        // A server without a revocation endpoint (where the account's token was issued): delete
        // locally, queue nothing that can never succeed.
        let bound = try await StoreWork.blocking { try self.store.boundRefreshToken(account: account)?.endpoints }
        let endpoints: ServerEndpoints?
        do {
            endpoints = try await client.endpoints(boundTo: bound)
        } catch let error where error.code == .storage {
            throw error  // a kept document that was altered: nothing is sent, nothing changed
        } catch {
            endpoints = nil  // offline: the token is queued and revoked where it is bound to later
        }
        if let endpoints, endpoints.revocation == nil {
            let removed = try await StoreWork.blocking { try self.store.ledger.clearLocally(account: account, reason: .notRevocable) }
            logger.info("logout: the server cannot revoke; local entries deleted", metadata: ["logout.outcome": "notRevocable"])
            return removed ? .notRevocable : .notFound
        }
        let preparation = try await StoreWork.blocking {
            try self.store.ledger.beginLogout(account: account, reason: reason, publishingEpochLater: true)
        }
        // The step's key provider epoch write (the logout's one Secret Service write, which
        // gnome-keyring makes by rewriting its whole file) runs beside the revocation: the user
        // waits for the slower of the two, not for both. The logout returns after both. Should
        // it not run (the task cancelled before it started), the step that records the
        // revocation makes it after its commit, as every write makes an owed one.
        async let published: Void = Self.publishOwedEpoch(store)
        let outcome = try await finishLogout(account: account, reason: reason, preparation)
        await published
        return outcome
    }

    /// ``TokenStore/publishOwedEpoch()`` on the blocking executor; a failure stays owed (logged there).
    private static func publishOwedEpoch(_ store: TokenStore) async {
        _ = try? await StoreWork.perform(on: store) { try $0.publishOwedEpoch() }
    }

    /// Steps 2 and 3 of a logout whose first step found `preparation`.
    private func finishLogout(
        account: AccountID, reason: CredentialStateReason, _ preparation: LogoutPreparation
    ) async throws -> LogoutOutcome {
        switch preparation {
        case .nothingStored:
            logger.info("logout: nothing stored", metadata: ["logout.outcome": "notFound"])
            return .notFound
        case .localOnly:
            try await StoreWork.blocking { try self.store.ledger.finishLocalLogout(account: account, reason: reason) }
            logger.info("logout: no refresh token, local entries deleted", metadata: ["logout.outcome": "revoked"])
            return .revoked
        case .queued(let entries):
            var outcomes: [LogoutOutcome] = []
            for entry in entries {
                // A pending or flagged entry not yet due is reported as it is.
                if Outbox().triesOnLogout(entry) {
                    outcomes.append(try await attempt(entry, using: client))
                } else if case .failed(let code, _) = Outbox.state(of: entry) {
                    outcomes.append(.revocationFailed(AuthSessionError.Code(known: code) ?? .invalidRequest))
                } else {
                    outcomes.append(.revocationPending)
                }
            }
            let outcome = Self.combine(outcomes)
            logger.info("logout finished", metadata: ["logout.outcome": outcome.description, "outbox.entries": "\(entries.count)"])
            return outcome
        }
    }

    /// Revokes one outbox entry at the server through `client` and records the result (steps 2 and 3).
    private func attempt(_ entry: PendingRevocation, using client: AuthorizationServerClient) async throws -> LogoutOutcome {
        let result = await client.revoke(entry.refreshToken, boundTo: entry.endpoints)
        CrashPoint.reach("logout.afterRevoke")
        if case .failedPermanently(let error) = result, error.code == .notRevocable {
            // No revocation endpoint: an entry that can never succeed is not kept.
            try await StoreWork.blocking { try self.store.ledger.discardPendingRevocation(entry) }
            return .notRevocable
        }
        let outcome: LogoutOutcome
        let record: RevocationAttemptResult
        switch result {
        case .revoked:
            outcome = .revoked
            record = .revoked
        case .retryLater(let error):
            outcome = .revocationPending
            record = Outbox().retryLater(
                entry, error: Self.summary(error), retryAfter: error.retryAfter, backoff: client.retryPolicy.backoffDelay(retry:))
        case .failedPermanently(let error):
            outcome = .revocationFailed(error.code)
            record = Outbox().failedPermanently(entry, code: error.code.rawValue, error: Self.summary(error))
        }
        try await StoreWork.blocking { try self.store.ledger.recordRevocationAttempt(entry, result: record) }
        CrashPoint.reach("logout.afterRecord")
        return outcome
    }

    static func combine(_ outcomes: [LogoutOutcome]) -> LogoutOutcome {
        if let failed = outcomes.first(where: { if case .revocationFailed = $0 { return true } else { return false } }) {
            return failed
        }
        if outcomes.contains(.revocationPending) { return .revocationPending }
        return .revoked
    }

    static func summary(_ error: AuthSessionError) -> String {
        var text = error.code.rawValue
        if let status = error.httpStatus { text += " http=\(status)" }
        if let oauth = error.oauthError { text += " oauth=\(oauth)" }
        return text
    }

}
