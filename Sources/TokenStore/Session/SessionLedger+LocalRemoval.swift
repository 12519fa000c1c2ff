import FoundationEssentials

/// The ledger's removals that revoke nothing at the server: giving up on a queued revocation,
/// and clearing an account locally.
extension SessionLedger {
    /// Gives up on a pending revocation explicitly: the entry is deleted without the token
    /// being revoked, and the choice is recorded in the user's history (`revocationDiscarded`).
    /// - Warning: the refresh token may still be valid at the server.
    package func discardPendingRevocation(_ entry: PendingRevocation) throws {
        let entryID = try OutboxRecord.entryID(entry)
        try connection.write { db, envelope in
            guard try OutboxRecord.delete(db, entryID: entryID) else { return }
            if try AccountMarks.settlesLogout(db, entryID: entryID, entry.account, envelope: envelope) {
                try AccountEntries.deleteLocal(db, entry.account, envelope: envelope)
            }
            if let userID = entry.appleUserID {
                try CredentialRecord.recordSignedOut(
                    db, userID: userID, leaving: nil, reason: .revocationDiscarded, detail: nil, envelope: envelope)
            }
        }
    }

    /// Removes `account`'s local entries without revoking anything at the server (Auth0's
    /// `CredentialsManager.clear()`): its refresh token, Apple user id, cached access tokens,
    /// ID token and profile. Outbox entries already queued stay queued. The user is recorded
    /// `revoked` with reason `clearedLocally` (or `reason`, such as `notRevocable` for a logout
    /// at a server that cannot revoke): the history says the token was not revoked.
    /// - Returns: whether anything was removed.
    /// - Warning: the refresh token stays valid at the server until it expires.
    @discardableResult
    package func clearLocally(account: AccountID, reason: CredentialStateReason = .clearedLocally) throws -> Bool {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        try TokenStore.validate(rtKey)
        return try connection.write { db, envelope in
            let hadItems = try ItemRecord.accountHasItems(db, account, envelope: envelope)
                || !(try AccessTokenRecord.all(db, of: account, envelope: envelope).isEmpty)
            guard hadItems else { return false }
            let userID = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope)
            try AccountEntries.deleteLocal(db, account, envelope: envelope)
            if let userID {
                try CredentialRecord.recordSignedOut(
                    db, userID: userID, leaving: account, reason: reason,
                    detail: CredentialStateDetail.notRevokedAtServer, envelope: envelope)
            }
            return true
        }
    }
}
