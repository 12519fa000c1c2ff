import Foundation

/// A refresh token waiting to be revoked at the authorization server.
public struct PendingRevocation: Sendable {
    /// The entry's random id (hex).
    public let id: String
    public let service: String
    public let account: String
    /// The Apple user id of the account, when it was known.
    public let appleUserID: String?
    /// The token to revoke.
    public let refreshToken: SecretBytes
    /// The reason recorded when the logout completes.
    public let reason: CredentialStateReason
    public let attempts: Int
    public let nextAttemptAt: Date
    /// The last error's code and short description (never a token).
    public let lastError: String?
    /// Set when the server refused the revocation for good (a configuration error), for the app to surface.
    public let failureCode: String?
    public let createdAt: Date
}

/// What ``TokenStore/beginLogout(account:service:reason:)`` found and did.
public enum LogoutPreparation: Sendable {
    /// Nothing is stored for the account, and nothing is pending.
    case nothingStored
    /// The account has local entries but no refresh token: only local clean-up is left.
    case localOnly(appleUserID: String?)
    /// The refresh token moved to the outbox (and entries already pending for the account are included).
    case queued([PendingRevocation])
}

/// The result of one attempt to revoke a pending entry.
public enum RevocationAttemptResult: Sendable {
    /// The server revoked it (or never knew it): the entry is deleted.
    case revoked
    /// A transient failure: try again at `nextAttemptAt`.
    case retryLater(error: String, nextAttemptAt: Date)
    /// A permanent failure (configuration): the entry is kept and flagged with `code`.
    case failedPermanently(code: String, error: String)
}

extension TokenStore {
    /// Step 1 of a logout, one transaction: marks the account as logging out and moves its
    /// refresh token into the pending-revocation outbox, so no read offers it any more.
    /// Nothing else is deleted yet, so a crash here loses nothing.
    public func beginLogout(
        account: String, service: String = ItemKey.defaultService, reason: CredentialStateReason = .userLogout
    ) throws -> LogoutPreparation {
        try Self.validate(ItemKey(service: service, account: account, kind: .refreshToken))
        try CredentialStateReason.validate(reason.rawValue, what: "reason")
        let preparation: LogoutPreparation = try write { db in
            let ref = accountRef(service: service, account: account)
            let userID = try readItem(db, key: ItemKey(service: service, account: account, kind: .appleUserID))?.secret.stringValue()
            let rtKey = ItemKey(service: service, account: account, kind: .refreshToken)
            if let token = try readItem(db, key: rtKey) {
                let entryID = try insertPendingRevocation(
                    db, service: service, account: account, appleUserID: userID, token: token.secret, reason: reason)
                try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(rtKey))])
                try db.run(
                    """
                    INSERT INTO account_marks(account_ref, logging_out, updated_at, logout_entry) VALUES (?, 1, ?, ?)
                    ON CONFLICT(account_ref) DO UPDATE SET logging_out = 1, updated_at = excluded.updated_at,
                        logout_entry = excluded.logout_entry
                    """, [.blob(ref), .int(Timestamp.nowMillis()), .blob(entryID)])
            }
            let pending = try readPendingRevocations(db, whereSQL: "account_ref = ?", [.blob(ref)])
                .filter { $0.service == service && $0.account == account }
            if !pending.isEmpty { return .queued(pending) }
            // By the items' lookups, not by account_ref (outside the seal: a changed one must not
            // turn a logout into "nothing stored" and leave the account's items behind).
            let lookups = ItemKind.allCases.map { SQLValue.blob(itemLookup(ItemKey(service: service, account: account, kind: $0))) }
            let hasItems = (try db.scalarInt(
                "SELECT count(*) FROM items WHERE lookup IN (\(lookups.map { _ in "?" }.joined(separator: ", ")))", lookups) ?? 0) > 0
            return hasItems ? .localOnly(appleUserID: userID) : .nothingStored
        }
        CrashPoint.reach("logout.afterBegin")
        return preparation
    }

    /// Local clean-up of a logout with nothing to revoke: deletes the account's Apple user id
    /// and cached access token and records `revoked`.
    ///
    /// When this leaves the store with no items and no pending revocations, the data key is
    /// rotated (crypto-erase; see ``TokenStore/Options/rotatesKeyAfterLastLogout``).
    public func finishLocalLogout(
        account: String, service: String = ItemKey.defaultService, reason: CredentialStateReason = .userLogout
    ) throws {
        try Self.validate(ItemKey(service: service, account: account, kind: .refreshToken))
        let emptied = try write { db in
            let before = try db.scalarInt("SELECT count(*) FROM items") ?? 0
            let userID = try readItem(db, key: ItemKey(service: service, account: account, kind: .appleUserID))?.secret.stringValue()
            try deleteLocalEntries(db, service: service, account: account)
            if let userID { try recordState(db, userID: userID, to: .revoked, reason: reason, detail: nil) }
            return try (db.scalarInt("SELECT count(*) FROM items") ?? 0) < before && markEraseOwedIfEmpty(db)
        }
        checkpointQuietly()
        if emptied { cryptoEraseAfterLastLogout() }
    }

    /// Records the result of a revocation attempt, in one transaction.
    ///
    /// - `revoked`: the entry is deleted.
    /// - `retryLater`: attempts, next attempt time and last error are updated.
    /// - `failedPermanently`: the entry is kept and flagged.
    ///
    /// If the entry's account is still marked as logging out, its Apple user id and cached
    /// access token are deleted, the mark cleared and the user recorded `revoked` (with the
    /// detail `remoteRevocationPending` or `remoteRevocationFailed` unless revoked). If the
    /// logout was already finished locally and the revocation now went through, the history
    /// records `revocationConfirmed`. Then the WAL is checkpointed.
    /// When the deleted entry was the store's last secret (no items, no pending revocations
    /// left), the data key is then rotated (crypto-erase; see ``TokenStore/Options``).
    /// - Returns: the user's credential state afterwards, when the user id is known.
    @discardableResult
    public func recordRevocationAttempt(_ entry: PendingRevocation, result: RevocationAttemptResult) throws -> CredentialState? {
        guard let entryID = Hex.decode(entry.id), entryID.count == 16 else {
            throw TokenStoreError(.invalidInput, "Not a pending-revocation id.")
        }
        if case .retryLater(_, let next) = result { try Self.validate(date: next, what: "next attempt") }
        let state: (CredentialState?, Bool) = try write { db in
            let exists = (try db.scalarInt("SELECT count(*) FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)]) ?? 0) > 0
            let detail: String?
            switch result {
            case .revoked:
                try db.run("DELETE FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)])
                detail = nil
            case .retryLater(let error, let next):
                try db.run(
                    "UPDATE pending_revocations SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE entry_id = ?",
                    [.int(Timestamp.millis(from: next)), .text(Self.clip(error)), .blob(entryID)])
                detail = CredentialStateDetail.remoteRevocationPending
            case .failedPermanently(let code, let error):
                try db.run(
                    "UPDATE pending_revocations SET attempts = attempts + 1, failed_code = ?, last_error = ? WHERE entry_id = ?",
                    [.text(Self.clip(code)), .text(Self.clip(error)), .blob(entryID)])
                detail = CredentialStateDetail.remoteRevocationFailed
            }
            if exists, try settlesLogout(db, entryID: entryID, service: entry.service, account: entry.account) {
                try deleteLocalEntries(db, service: entry.service, account: entry.account)
                if let userID = entry.appleUserID {
                    try recordState(db, userID: userID, to: .revoked, reason: entry.reason, detail: detail)
                }
            } else if exists, case .revoked = result, let userID = entry.appleUserID,
                      try currentState(db, userID: userID) == .revoked,
                      try lastDetail(db, userID: userID) != nil {
                try recordState(db, userID: userID, to: .revoked, reason: .revocationConfirmed, detail: nil)
            }
            let emptied = try exists && markEraseOwedIfEmpty(db)
            return (try entry.appleUserID.map { try currentState(db, userID: $0) }, emptied)
        }
        checkpointQuietly()
        if state.1 { cryptoEraseAfterLastLogout() }
        return state.0
    }

    /// The outbox entries, oldest first; only those due by `dueBy` when given. Flagged
    /// (permanently failed) entries are included only when `includeFailed` is true.
    public func pendingRevocations(dueBy: Date? = nil, includeFailed: Bool = true) throws -> [PendingRevocation] {
        try read { db in
            var conditions: [String] = []
            var arguments: [SQLValue] = []
            if let dueBy {
                conditions.append("next_attempt_at <= ?")
                arguments.append(.int(Timestamp.millis(from: dueBy)))
            }
            if !includeFailed { conditions.append("failed_code IS NULL") }
            return try readPendingRevocations(db, whereSQL: conditions.isEmpty ? "1" : conditions.joined(separator: " AND "), arguments)
        }
    }

    /// Gives up on a pending revocation explicitly: the entry is deleted without the token
    /// being revoked, and the choice is recorded in the user's history (`revocationDiscarded`).
    /// Rotates the data key afterwards when nothing secret is left (crypto-erase).
    /// - Warning: the refresh token may still be valid at the server.
    public func discardPendingRevocation(_ entry: PendingRevocation) throws {
        guard let entryID = Hex.decode(entry.id), entryID.count == 16 else {
            throw TokenStoreError(.invalidInput, "Not a pending-revocation id.")
        }
        let emptied = try write { db in
            try db.run("DELETE FROM pending_revocations WHERE entry_id = ?", [.blob(entryID)])
            guard db.changes > 0 else { return false }
            if try settlesLogout(db, entryID: entryID, service: entry.service, account: entry.account) {
                try deleteLocalEntries(db, service: entry.service, account: entry.account)
            }
            if let userID = entry.appleUserID {
                try recordState(db, userID: userID, to: .revoked, reason: .revocationDiscarded, detail: nil)
            }
            return try markEraseOwedIfEmpty(db)
        }
        if emptied { cryptoEraseAfterLastLogout() }
    }

    // MARK: Internals

    /// Queues `token` in the outbox; returns the new entry's id.
    @discardableResult
    func insertPendingRevocation(
        _ db: Database, service: String, account: String, appleUserID: String?, token: SecretBytes,
        reason: CredentialStateReason
    ) throws -> [UInt8] {
        let entryID = SecretBytes.random(count: 16).copyBytes()
        var fields = RecordFields()
        fields.set(.service, service)
        fields.set(.account, account)
        if let appleUserID { fields.set(.appleUserID, appleUserID) }
        fields.set(.label, reason.rawValue)
        fields.setSecret(token)
        let now = Timestamp.nowMillis()
        try db.run(
            """
            INSERT INTO pending_revocations(entry_id, account_ref, key_id, sealed, attempts, next_attempt_at, created_at)
            VALUES (?, ?, ?, ?, 0, ?, ?)
            """,
            [.blob(entryID), .blob(accountRef(service: service, account: account)), .blob(dataKey.keyID),
             .blob(seal(fields, kind: .pendingRevocation, rowKey: entryID)), .int(now), .int(now)])
        return entryID
    }

    /// Whether settling outbox entry `entryID` finishes its account's logout: the account is
    /// marked as logging out and the mark is this entry's (or was written before marks named
    /// their entry). An older entry of the account settles only itself.
    func settlesLogout(_ db: Database, entryID: [UInt8], service: String, account: String) throws -> Bool {
        try db.firstRow(
            "SELECT logging_out, logout_entry FROM account_marks WHERE account_ref = ?",
            [.blob(accountRef(service: service, account: account))]
        ) { row in row.int(0) != 0 && (row.isNull(1) || row.blob(1) == entryID) } ?? false
    }

    func readPendingRevocations(_ db: Database, whereSQL: String, _ arguments: [SQLValue]) throws -> [PendingRevocation] {
        var entries: [PendingRevocation] = []
        try db.forEachRow(
            """
            SELECT entry_id, key_id, sealed, attempts, next_attempt_at, last_error, failed_code, created_at, account_ref
            FROM pending_revocations WHERE \(whereSQL) ORDER BY created_at, entry_id
            """, arguments
        ) { row in
            let entryID = row.blob(0)
            let fields = try open(row.blob(2), keyID: row.blob(1), kind: .pendingRevocation, rowKey: entryID)
            guard let service = fields.string(.service), let account = fields.string(.account),
                  let token = fields.secret, accountRef(service: service, account: account) == row.blob(8)
            else { throw TokenStoreError(.integrityCheckFailed, "A pending revocation is missing fields or misplaced.") }
            entries.append(PendingRevocation(
                id: Hex.encode(entryID), service: service, account: account, appleUserID: fields.string(.appleUserID),
                refreshToken: token, reason: CredentialStateReason(rawValue: fields.string(.label) ?? "userLogout"),
                attempts: Int(row.int(3)), nextAttemptAt: Timestamp.date(fromMillis: row.int(4)),
                lastError: row.textOrNil(5), failureCode: row.textOrNil(6), createdAt: Timestamp.date(fromMillis: row.int(7))))
        }
        return entries
    }

    /// Deletes an account's remaining local entries (Apple user id, access-token cache,
    /// any refresh token) and its logout mark.
    func deleteLocalEntries(_ db: Database, service: String, account: String) throws {
        for kind in [ItemKind.refreshToken, .appleUserID, .accessToken] {
            try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(ItemKey(service: service, account: account, kind: kind)))])
        }
        try clearLogoutMark(db, service: service, account: account)
    }

    /// Moves WAL content into the main file so deleted ciphertext does not linger in -wal.
    /// A checkpoint that cannot run now (readers in other processes) is simply partial; one
    /// that fails is logged, never thrown: it runs after a commit, which has succeeded.
    func checkpointQuietly() {
        do {
            try withDatabase { db in try db.checkpoint() }
        } catch {
            logger.info("WAL checkpoint after a commit failed; the next one catches up", metadata: ["error": Self.code(of: error)])
        }
    }

    static func clip(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f }
        return String(String.UnicodeScalarView(printable.prefix(200)))
    }
}
