import FoundationEssentials

/// The session layer's transactions on a store: sign-in, refresh (compare-and-swap), and the
/// logout outbox. For `AuthSession` (package access): an app that called one of these on its
/// own could leave an account half logged out.
///
/// None of them runs maintenance: a transaction that removes the store's last secret records
/// a crypto-erase as owed, and ``TokenStore/performOwedMaintenance()`` runs it (the session
/// calls it after a logout, and every open runs it).
package struct SessionLedger: Sendable {
    let connection: StoreConnection

    // MARK: Sign-in and refresh

    /// Checks the names a sign-in will store, as ``saveSignIn(account:refreshToken:appleUserID:accessToken:)``
    /// does, so that a session can refuse bad input before it asks the server for tokens.
    /// - Throws: `invalidInput`.
    package static func validateSignIn(account: AccountID, appleUserID: String?) throws {
        try TokenStore.validate(account)
        if let appleUserID { try TokenStore.validate(userID: appleUserID) }
    }

    /// Stores a sign-in in one transaction: the refresh token, the Apple user id, the
    /// access-token cache and, with an `identity`, the ID token and the profile of `account`,
    /// and records the user as `authorized`.
    ///
    /// A refresh token the account already held is never dropped: it goes to the
    /// pending-revocation outbox, and when it belonged to another Apple user, that user is
    /// recorded `revoked` (reason `replacedBySignIn`, revocation pending).
    /// With `dpopThumbprint`, the refresh token is recorded bound to that DPoP key (without, any
    /// earlier binding of the account is dropped). With `endpoints`, it is recorded bound to the
    /// server that issued it: renewal and revocation send it there only.
    /// - Returns: whether a previous refresh token was queued for revocation.
    /// - Throws: `invalidInput`, storage errors. Nothing is stored when it throws.
    @discardableResult
    package func saveSignIn(
        account: AccountID, refreshToken: SecretBytes,
        appleUserID: String, accessToken: AccessTokenEntry?, cacheKey: AccessTokenKey? = nil,
        identity: SignInIdentity? = nil, dpopThumbprint: String? = nil, endpoints: ServerEndpoints? = nil
    ) throws -> Bool {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        let cacheKey = cacheKey ?? AccessTokenKey(account: account, audience: nil, scopes: accessToken?.scopes ?? [])
        try Self.validateSignIn(account: account, appleUserID: appleUserID)
        try TokenStore.validate(secret: refreshToken, attributes: .init())
        try TokenStore.validate(cacheKey)
        if let accessToken { try accessToken.validate() }
        try endpoints?.validate()
        if let identity {
            try TokenStore.validate(secret: identity.idToken, attributes: .init())
            try TokenStore.validate(secret: identity.profile.sealedForm, attributes: .init())
        }
        return try connection.write { db, envelope in
            var queued = false
            let previousUser = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope)
            if let previous = try ItemRecord.find(db, rtKey, envelope: envelope), previous.secret != refreshToken {
                try OutboxRecord.insert(
                    db, account, appleUserID: previousUser, token: previous.secret,
                    reason: .replacedBySignIn, endpoints: previous.endpoints, envelope: envelope)
                if let previousUser, previousUser != appleUserID {
                    try CredentialRecord.recordSignedOut(
                        db, userID: previousUser, leaving: account, reason: .replacedBySignIn,
                        detail: CredentialStateDetail.remoteRevocationPending, envelope: envelope)
                }
                queued = true
            }
            try Self.storeIdentity(db, account, identity, sameUser: previousUser == appleUserID, envelope: envelope)
            try ItemRecord.upsert(db, rtKey, secret: refreshToken, endpoints: endpoints, envelope: envelope)
            try ItemRecord.upsert(db, rtKey.sibling(.appleUserID), secret: SecretBytes(utf8: appleUserID), envelope: envelope)
            // The cache belonged to the session this sign-in replaces.
            try AccessTokenRecord.deleteAll(db, of: account, envelope: envelope)
            try ItemRecord.delete(db, rtKey.sibling(.accessToken), envelope: envelope)
            if let accessToken { try AccessTokenRecord.upsert(db, cacheKey, accessToken, envelope: envelope) }
            try AccountMarks.clear(db, account, envelope: envelope)
            if let dpopThumbprint {
                try DPoPStateRecord.upsert(db, .binding(account), secret: SecretBytes(utf8: dpopThumbprint), envelope: envelope)
            } else {
                try DPoPStateRecord.delete(db, .binding(account), envelope: envelope)
            }
            try CredentialRecord.record(db, userID: appleUserID, to: .authorized, reason: .signIn, detail: nil, envelope: envelope)
            return queued
        }
    }

    /// The access token cached at `key`, or `nil` (none, or the account is logging out).
    package func cachedAccessToken(_ key: AccessTokenKey) throws -> AccessTokenEntry? {
        try TokenStore.validate(key)
        return try connection.gatedRead(.accessToken) { db, envelope in
            guard try !AccountMarks.isLoggingOut(db, key.account, envelope: envelope),
                let entry = try AccessTokenRecord.find(db, key, envelope: envelope)?.entry
            else { return nil }
            try connection.requirePresence(for: .accessToken, envelope: envelope)
            return entry
        }
    }

    /// Every access token cached for `account`, most recently stored first (none while it is
    /// logging out).
    package func cachedAccessTokens(account: AccountID) throws -> [CachedAccessToken] {
        try TokenStore.validate(account)
        return try connection.withPresence {
            try connection.read { db, envelope in
                guard try !AccountMarks.isLoggingOut(db, account, envelope: envelope) else { return [] }
                let all = try AccessTokenRecord.all(db, of: account, envelope: envelope)
                if !all.isEmpty { try connection.requirePresence(for: .accessToken, envelope: envelope) }
                return all
            }
        }
    }

    /// Whether `account` has a refresh token to renew with (and is not logging out), read
    /// without opening the token.
    package func hasRefreshToken(account: AccountID) throws -> Bool {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        try TokenStore.validate(rtKey)
        return try connection.read { db, envelope in
            guard try ItemRecord.exists(db, rtKey, envelope: envelope) else { return false }
            return try !AccountMarks.isLoggingOut(db, account, envelope: envelope)
        }
    }

    /// Stores the result of a refresh in one durable transaction, but only if the refresh
    /// token presented to the server is still the account's (compare-and-swap).
    ///
    /// With rotation, `newRefreshToken` replaces the presented one; without, the presented
    /// one is kept. When the account was logged out or signed in anew meanwhile, nothing is
    /// stored and a new refresh token goes to the revocation outbox (``RefreshTokenReplacement/superseded``).
    /// The access token is cached at `cacheKey` (the account's other cached tokens stay
    /// valid: one refresh token serves every audience); a `nil` one clears that entry.
    /// With `dropsOtherAccessTokens`, a rotation (a new refresh token, not the presented one)
    /// first deletes the account's other cached access tokens: servers such as
    /// django-oauth-toolkit revoke the access token issued with a refresh token when they
    /// rotate that refresh token out. `endpoints` are the server endpoints the refresh went to:
    /// the stored refresh token is bound to them from now on (a token stored without a binding
    /// gets one; `nil` keeps the binding it has).
    package func replaceRefreshToken(
        account: AccountID, presented: SecretBytes,
        with newRefreshToken: SecretBytes?, accessToken: AccessTokenEntry?, cacheKey: AccessTokenKey? = nil,
        dropsOtherAccessTokens: Bool = false, endpoints: ServerEndpoints? = nil
    ) throws -> RefreshTokenReplacement {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        let cacheKey = cacheKey ?? AccessTokenKey(account: account, audience: nil, scopes: accessToken?.scopes ?? [])
        try TokenStore.validate(rtKey)
        try TokenStore.validate(cacheKey)
        if let accessToken { try accessToken.validate() }
        if let newRefreshToken { try TokenStore.validate(secret: newRefreshToken, attributes: .init()) }
        try endpoints?.validate()
        return try connection.write { db, envelope in
            let current = try ItemRecord.find(db, rtKey, envelope: envelope)
            if let current, current.secret == presented,
                try !AccountMarks.isLoggingOut(db, account, envelope: envelope)
            {
                let binding = endpoints ?? current.endpoints
                if newRefreshToken != nil || binding != current.endpoints {
                    try ItemRecord.upsert(db, rtKey, secret: newRefreshToken ?? presented, endpoints: binding, envelope: envelope)
                    if dropsOtherAccessTokens, let newRefreshToken, newRefreshToken != presented {
                        try AccessTokenRecord.deleteAll(db, of: account, envelope: envelope)
                    }
                }
                if let accessToken {
                    try AccessTokenRecord.upsert(db, cacheKey, accessToken, envelope: envelope)
                } else {
                    try AccessTokenRecord.delete(db, cacheKey, envelope: envelope)
                }
                db.noteChange(.tokensRenewed(account))
                return .stored
            }
            if let newRefreshToken {
                let userID = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope)
                try OutboxRecord.insert(
                    db, account, appleUserID: userID, token: newRefreshToken,
                    reason: .userLogout, endpoints: endpoints ?? current?.endpoints, envelope: envelope)
            }
            return .superseded
        }
    }

    /// The server refused `presented` (`invalid_grant`): stop offering it. If it is still the
    /// account's refresh token, it and the access-token cache are deleted and the user is
    /// recorded `revoked` with reason `refreshRejected`. Returns whether anything changed.
    @discardableResult
    package func rejectRefreshToken(
        account: AccountID, presented: SecretBytes
    ) throws -> Bool {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        try TokenStore.validate(rtKey)
        return try connection.write { db, envelope in
            guard let current = try ItemRecord.find(db, rtKey, envelope: envelope), current.secret == presented else { return false }
            try ItemRecord.delete(db, rtKey, envelope: envelope)
            try ItemRecord.delete(db, rtKey.sibling(.accessToken), envelope: envelope)
            try AccessTokenRecord.deleteAll(db, of: account, envelope: envelope)
            if let userID = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope) {
                try CredentialRecord.recordSignedOut(db, userID: userID, leaving: account, reason: .refreshRejected, detail: nil, envelope: envelope)
            }
            return true
        }
    }

    // MARK: Logout

    /// Step 1 of a logout, one transaction: marks the account as logging out and moves its
    /// refresh token into the pending-revocation outbox, so no read offers it any more.
    /// Nothing else is deleted yet, so a crash here loses nothing.
    package func beginLogout(
        account: AccountID, reason: CredentialStateReason = .userLogout
    ) throws -> LogoutPreparation {
        try beginLogout(account: account, reason: reason, publishingEpochLater: false)
    }

    /// As ``beginLogout(account:reason:)``; with `publishingEpochLater`, the key provider's epoch
    /// write that the step's file epoch raise owes (the logout's one Secret Service write, about
    /// 200 ms with 1,000 items in gnome-keyring) is left owed for the caller to make with
    /// ``TokenStore/publishOwedEpoch()`` while the revocation is under way, so a logout waits
    /// for the slower of the two instead of both. Until it is made, an open of another process
    /// heals it (the file is ahead) and the next write of this store makes it.
    package func beginLogout(
        account: AccountID, reason: CredentialStateReason, publishingEpochLater: Bool
    ) throws -> LogoutPreparation {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        try TokenStore.validate(rtKey)
        try CredentialStateReason.validate(reason.rawValue, what: "reason")
        let preparation: LogoutPreparation = try connection.write { db, envelope in
            if publishingEpochLater { db.deferEpochPublication() }
            let userID = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope)
            if let token = try ItemRecord.find(db, rtKey, envelope: envelope) {
                let entryID = try OutboxRecord.insert(
                    db, account, appleUserID: userID, token: token.secret, reason: reason,
                    endpoints: token.endpoints, envelope: envelope)
                // The insert must have taken effect before the token leaves the items.
                guard try OutboxRecord.exists(db, entryID: entryID) else {
                    throw TokenStoreError(.ioError, "The revocation outbox did not keep the refresh token; nothing was changed.")
                }
                try ItemRecord.delete(db, rtKey, envelope: envelope)
                try AccountMarks.markLoggingOut(db, account, entryID: entryID, envelope: envelope)
                // The outbox insert made this an epoch-raising transaction (storeRolledBack for an older copy).
            }
            let pending = try OutboxRecord.entries(db, of: account, envelope: envelope)
            if !pending.isEmpty { return .queued(pending) }
            let hasItems = try ItemRecord.accountHasItems(db, account, envelope: envelope)
                || !(try AccessTokenRecord.all(db, of: account, envelope: envelope).isEmpty)
            return hasItems ? .localOnly(appleUserID: userID) : .nothingStored
        }
        CrashPoint.reach("logout.afterBegin")
        return preparation
    }

    /// Local clean-up of a logout with nothing to revoke: deletes the account's Apple user id
    /// and cached access token and records `revoked`. When this leaves the store with no
    /// secrets, a crypto-erase is owed (see ``TokenStore/performOwedMaintenance()``).
    package func finishLocalLogout(
        account: AccountID, reason: CredentialStateReason = .userLogout
    ) throws {
        let rtKey = ItemKey(account: account, kind: .refreshToken)
        try TokenStore.validate(rtKey)
        try connection.write { db, envelope in
            let userID = try ItemRecord.string(db, rtKey.sibling(.appleUserID), envelope: envelope)
            try AccountEntries.deleteLocal(db, account, envelope: envelope)
            if let userID {
                try CredentialRecord.recordSignedOut(db, userID: userID, leaving: account, reason: reason, detail: nil, envelope: envelope)
            }
        }
    }

    /// Records the result of a revocation attempt, in one transaction (the moves are ``Outbox``'s).
    ///
    /// - `revoked`: the entry is deleted.
    /// - `retryLater`: attempts, next attempt time and last error are updated.
    /// - `failedPermanently`: the entry is kept, flagged, and scheduled for a late retry.
    ///
    /// The schedule is written with its MAC, after the stored one was checked against its own.
    /// If the entry's account is still marked as logging out by this entry, its Apple user id
    /// and cached access token are deleted, the mark cleared and the user recorded `revoked`
    /// (with the detail `remoteRevocationPending` or `remoteRevocationFailed` unless revoked).
    /// If the logout was already finished locally and the revocation now went through, the
    /// history records `revocationConfirmed`. What the removal owes (a checkpoint, a crypto-erase
    /// when no secret is left) the records report and the connection pays (``SecretRemovalObserver``).
    /// - Returns: the user's credential state afterwards, when the user id is known.
    /// - Throws: `integrityCheckFailed` when the entry's stored schedule was altered (nothing
    ///   is recorded; a revocation that went through is harmless to repeat).
    @discardableResult
    package func recordRevocationAttempt(_ entry: PendingRevocation, result: RevocationAttemptResult) throws -> CredentialState? {
        let entryID = try OutboxRecord.entryID(entry)
        switch result {
        case .retryLater(_, let next), .failedPermanently(_, _, let next): try TokenStore.validate(date: next, what: "next attempt")
        case .revoked: break
        }
        return try connection.write { db, envelope in
            let exists = try OutboxRecord.exists(db, entryID: entryID)
            if case .revoked = result {
                try OutboxRecord.delete(db, entryID: entryID)
            } else {
                try OutboxRecord.updateSchedule(db, entryID: entryID, envelope: envelope) { Outbox.apply(result, to: &$0) }
            }
            let detail = Outbox.detail(after: result)
            if exists, try AccountMarks.settlesLogout(
                db, entryID: entryID, entry.account, envelope: envelope)
            {
                // The logout's first step raised the epoch when it marked the account by this entry.
                let coveredByBegin = try AccountMarks.isMarked(db, by: entryID, entry.account, envelope: envelope)
                let settle = {
                    try AccountEntries.deleteLocal(db, entry.account, envelope: envelope)
                    if let userID = entry.appleUserID {
                        try CredentialRecord.recordSignedOut(
                            db, userID: userID, leaving: entry.account, reason: entry.reason, detail: detail, envelope: envelope)
                    }
                }
                if coveredByBegin { try db.coveringEpochRaise(settle) } else { try settle() }
            } else if exists, case .revoked = result, let userID = entry.appleUserID,
                try CredentialRecord.state(db, userID: userID, envelope: envelope) == .revoked,
                try CredentialRecord.lastDetail(db, userID: userID, envelope: envelope) != nil
            {
                try CredentialRecord.record(db, userID: userID, to: .revoked, reason: .revocationConfirmed, detail: nil, envelope: envelope)
            }
            return try entry.appleUserID.map { try CredentialRecord.state(db, userID: $0, envelope: envelope) }
        }
    }

    // MARK: Internals

    /// Stores the ID token and the profile of a sign-in. A profile of the same user keeps the
    /// name and email the new ID token no longer carries (Apple sends them once); another
    /// user's profile is replaced whole. Without an identity, another user's are deleted.
    private static func storeIdentity(
        _ db: Database, _ account: AccountID, _ identity: SignInIdentity?, sameUser: Bool, envelope: Envelope
    ) throws {
        let idTokenKey = ItemKey(account: account, kind: .idToken)
        let profileKey = ItemKey(account: account, kind: .profile)
        guard let identity else {
            if !sameUser {
                try ItemRecord.delete(db, idTokenKey, envelope: envelope)
                try ItemRecord.delete(db, profileKey, envelope: envelope)
            }
            return
        }
        var profile = identity.profile
        if sameUser, let stored = try ItemRecord.find(db, profileKey, envelope: envelope),
            let older = UserProfile(sealedForm: stored.secret, userID: nil), older.subject == profile.subject
        {
            profile = profile.filling(from: older)
        }
        profile.userID = nil
        try ItemRecord.upsert(db, idTokenKey, secret: identity.idToken, envelope: envelope)
        try ItemRecord.upsert(db, profileKey, secret: profile.sealedForm, envelope: envelope)
    }

    static func clip(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f }
        return String(String.UnicodeScalarView(printable.prefix(200)))
    }
}
