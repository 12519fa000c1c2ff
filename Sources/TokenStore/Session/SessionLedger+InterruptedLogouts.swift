import FoundationEssentials

extension SessionLedger {
    /// How long after its first step a logout that has not recorded a revocation attempt is
    /// taken for interrupted (Ctrl-C, a crash, a kill) rather than still waiting for the server:
    /// longer than the default retry policy's whole budget (60 s) and a request time-out.
    package static let interruptedLogoutAge: Duration = .seconds(120)

    /// Finishes the local part of the logouts interrupted after their first step (the refresh
    /// token in the outbox, the account marked as logging out) at least `age` ago, as the
    /// logout itself does when the server cannot be reached: the account's Apple user id, ID
    /// token, profile and cached access tokens are deleted, the mark cleared, and the user
    /// recorded `revoked` with the detail `remoteRevocationPending` (or kept `authorized` while
    /// another account of the user holds a refresh token). The outbox entry stays queued for
    /// ``LogoutCoordinator``'s resume. Only a mark whose MAC matches and whose outbox entry
    /// opens is finished; anything else is left to the logout, a resume or `verify`.
    ///
    /// The writing open calls it (``TokenStore/init(path:appID:keyProvider:logger:options:)``);
    /// it writes nothing when there is nothing to finish, and a read-only open never calls it.
    /// - Returns: how many logouts it finished.
    @discardableResult
    package func finishInterruptedLogouts(olderThan age: Duration = interruptedLogoutAge) throws -> Int {
        let cutoff = SQLValue.int(Timestamp.nowMillis() - Int64(age.timeInterval * 1000))
        let query = "SELECT account_ref FROM account_marks WHERE logging_out = 1 AND updated_at <= ?"
        // A plain read first: an open with nothing to finish starts no write transaction.
        let candidates = try connection.withDatabase { db in
            try db.scalarInt("SELECT count(*) FROM account_marks WHERE logging_out = 1 AND updated_at <= ?", [cutoff]) ?? 0
        }
        guard candidates > 0 else { return 0 }
        return try connection.write { db, envelope in
            var refs: [[UInt8]] = []
            try db.forEachRow(query, [cutoff]) { refs.append($0.blob(0)) }
            var finished = 0
            for ref in refs {
                guard let mark = try AccountMarks.find(db, ref: ref, envelope: envelope), mark.authenticated, mark.loggingOut,
                    let entryID = mark.entry,
                    let entry = try OutboxRecord.listing(db, where: "entry_id = ?", [.blob(entryID)], envelope: envelope).entries.first,
                    envelope.accountRef(entry.account) == ref
                else { continue }
                try AccountEntries.deleteLocal(db, entry.account, envelope: envelope)
                if let userID = entry.appleUserID {
                    try CredentialRecord.recordSignedOut(
                        db, userID: userID, leaving: entry.account, reason: entry.reason,
                        detail: CredentialStateDetail.remoteRevocationPending, envelope: envelope)
                }
                finished += 1
            }
            return finished
        }
    }
}
