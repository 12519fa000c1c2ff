import FoundationEssentials

extension CredentialRecord {
    /// Records that `account` of `userID` signed out (a logout, a local clear, a refused or
    /// replaced refresh token, a discarded revocation), in the caller's transaction. `account`
    /// is left out of the check below (its refresh token may not be gone yet); nil: none is.
    ///
    /// The credential state is the user's, and a user may be signed in on several accounts of
    /// the store: the user becomes `revoked` only when no other account of theirs still holds a
    /// refresh token (one that is not being logged out). Otherwise the state stays `authorized`
    /// and the history records the sign-out as `authorized → authorized` with `reason` and the
    /// detail ``CredentialStateDetail/otherAccountSignedIn``; the transaction then raises the
    /// store epoch itself (the local entries it deleted must not come back with an older copy).
    /// - Returns: the user's state afterwards.
    @discardableResult
    static func recordSignedOut(
        _ db: Database, userID: String, leaving account: AccountID?, reason: CredentialStateReason, detail: String?,
        envelope: Envelope
    ) throws -> CredentialState {
        guard try otherAccountHoldsRefreshToken(db, userID: userID, besides: account, envelope: envelope) else {
            try record(db, userID: userID, to: .revoked, reason: reason, detail: detail, envelope: envelope)
            return .revoked
        }
        // The other account's sign-in recorded `authorized`; a state that says otherwise (left
        // by a version without this rule) is set right by the same record.
        try record(
            db, userID: userID, to: .authorized, reason: reason, detail: CredentialStateDetail.otherAccountSignedIn,
            envelope: envelope)
        db.requireEpochRaise(.localEntriesDeleted)
        return .authorized
    }

    /// Whether an account of `userID` other than `account` stores a refresh token and is not
    /// being logged out. Opens the stored Apple user ids (one per signed-in account).
    static func otherAccountHoldsRefreshToken(
        _ db: Database, userID: String, besides account: AccountID?, envelope: Envelope
    ) throws -> Bool {
        let wanted = SecretBytes(utf8: userID)
        var others: [AccountID] = []
        try ItemRecord.forEach(db, kind: .appleUserID, envelope: envelope) { item in
            if item.secret == wanted, account.map({ !item.key.account.hasSameBytes(as: $0) }) ?? true { others.append(item.key.account) }
        }
        for other in others where try ItemRecord.exists(db, ItemKey(account: other, kind: .refreshToken), envelope: envelope) {
            if try !AccountMarks.isLoggingOut(db, other, envelope: envelope) { return true }
        }
        return false
    }
}
