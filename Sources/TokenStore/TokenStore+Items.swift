import FoundationEssentials

extension TokenStore {
    /// Stores `secret` at `key`, replacing what was there (an upsert: never a duplicate-item error).
    ///
    /// Storing a refresh token starts a new session for the account: a logout that had
    /// begun for it stays on its way (its token is already in the revocation outbox).
    /// - Throws: `invalidInput` (empty or oversize values), `databaseBusy`, `ioError`.
    public func set(_ secret: SecretBytes, for key: ItemKey, attributes: ItemAttributes = .init()) throws {
        try Self.validate(key)
        try Self.validate(secret: secret, attributes: attributes)
        // The profile's layout is the store's own (what `userProfile(account:)` reads).
        guard key.kind != .profile || UserProfile(sealedForm: secret, userID: nil) != nil else {
            throw TokenStoreError(.invalidInput, "A profile item must hold the profile JSON a sign-in writes.")
        }
        try connection.write { db, envelope in
            try ItemRecord.upsert(db, key, secret: secret, attributes: attributes, envelope: envelope)
            if key.kind == .refreshToken {
                try AccountMarks.clear(db, key.account, envelope: envelope)
            }
        }
    }

    /// The item at `key` with its secret, or `nil` when there is none.
    ///
    /// Never `nil` because of a locked keyring or a damaged row: those throw.
    ///
    /// Under a ``AccessPolicy/userPresence(_:)`` policy, an existing item of a gated kind (the
    /// refresh token, generic items, and ``Options/userPresenceAlsoFor``) is handed out only
    /// after polkit confirmed the user's presence within the policy's window: this call may
    /// wait for the user (on the calling thread, up to the time-out).
    /// - Throws: `integrityCheckFailed`, `databaseCorrupt`, `databaseBusy`, `storeClosed`, `invalidInput`;
    ///   `userPresenceDenied`, `timedOut`, `lockSourceUnavailable` (no polkit) under userPresence.
    public func item(for key: ItemKey) throws -> StoredItem? {
        try Self.validate(key)
        return try connection.gatedRead(key.kind) { db, envelope in
            guard let found = try ItemRecord.find(db, key, envelope: envelope) else { return nil }
            try connection.requirePresence(for: key.kind, envelope: envelope)
            return found.stored(envelope)
        }
    }


    /// The short fingerprint this store shows for `secret` (the one in ``ItemInfo/fingerprint``
    /// and ``StoredItem/fingerprint``): keyed BLAKE2b under a subkey of the store's data key, 4
    /// bytes in hex. Stable for this store while its data key stays; the same secret in another
    /// store has another fingerprint, and without the key it cannot be brute-forced back to a
    /// short secret. Answers from inside a callback of the store too; while the store is locked
    /// (its key wiped) it is the empty string.
    public func fingerprint(of secret: SecretBytes) -> String {
        connection.activeEnvelope?.fingerprint(secret) ?? ""
    }

    /// The secret at `key`, or `nil` when there is none. See ``item(for:)``.
    public func secret(for key: ItemKey) throws -> SecretBytes? {
        try Self.validate(key)
        // The secret alone: no fingerprint (a keyed hash over the whole secret) is computed.
        return try connection.gatedRead(key.kind) { db, envelope in
            guard let secret = try ItemRecord.secret(db, key, envelope: envelope) else { return nil }
            try connection.requirePresence(for: key.kind, envelope: envelope)
            return secret
        }
    }

    /// Deletes the item at `key`. Succeeds when there is nothing to delete.
    /// - Warning: the secret is gone for good (secure delete).
    public func delete(_ key: ItemKey) throws {
        try Self.validate(key)
        try connection.write { db, envelope in _ = try ItemRecord.delete(db, key, envelope: envelope) }
    }

    /// Metadata of every item, without secrets. Rows are opened one at a time, so memory
    /// stays flat however large the store is.
    /// - Throws: `integrityCheckFailed` on the first row that does not open (use ``verify(progress:)`` to see them all).
    public func items() throws -> [ItemInfo] {
        var result: [ItemInfo] = []
        try forEachItem { result.append($0) }
        return result
    }

    /// Calls `body` with the metadata of each item, streaming.
    ///
    /// `body` runs inside the store's read: it must not call this store (that throws
    /// `invalidInput`). To act on items, collect their keys and act after the call returns.
    public func forEachItem(_ body: (ItemInfo) throws -> Void) throws {
        try connection.read { db, envelope in
            try ItemRecord.forEach(db, envelope: envelope) { try body($0.info(envelope)) }
        }
    }

    /// The accounts that have items, with the kinds each holds.
    public func accounts() throws -> [AccountInfo] {
        try connection.read { db, envelope in
            var kinds: [AccountID: Set<ItemKind>] = [:]
            try ItemRecord.forEach(db, envelope: envelope) { item in kinds[item.key.account, default: []].insert(item.key.kind) }
            return try kinds.map { account, kinds in
                AccountInfo(
                    account: account, kinds: kinds,
                    isLoggingOut: try AccountMarks.isLoggingOut(db, account, envelope: envelope))
            }
        }.sorted { ($0.account.service, $0.account.name) < ($1.account.service, $1.account.name) }
    }

    /// The accounts whose stored Apple user id is `userID`.
    public func accounts(forAppleUserID userID: String) throws -> [AccountID] {
        try Self.validate(userID: userID)
        let wanted = SecretBytes(utf8: userID)
        return try connection.read { db, envelope in
            var found: [AccountID] = []
            try ItemRecord.forEach(db, kind: .appleUserID, envelope: envelope) { item in
                if item.secret == wanted { found.append(item.key.account) }
            }
            return found
        }
    }

    /// The account's refresh token, or `nil` when none is stored (or a logout has taken it).
    public func refreshToken(account: AccountID) throws -> SecretBytes? {
        try secret(for: ItemKey(account: account, kind: .refreshToken))
    }

    /// The account's Apple user id, or `nil`.
    /// - Note: the id is returned as a `String`: it is an identifier, not a credential.
    public func appleUserID(account: AccountID) throws -> String? {
        try secret(for: ItemKey(account: account, kind: .appleUserID))?.stringValue()
    }

    /// The account's profile from its sign-ins' ID tokens (user id, `sub`, name, email), or
    /// `nil` when the account has none (never signed in through an ID token, or logged out).
    /// - Throws: `databaseCorrupt` when the sealed profile does not decode.
    public func userProfile(account: AccountID) throws -> UserProfile? {
        let key = ItemKey(account: account, kind: .profile)
        try Self.validate(key)
        return try connection.withPresence { try connection.read { db, envelope in
            guard let item = try ItemRecord.find(db, key, envelope: envelope) else { return nil }
            try connection.requirePresence(for: .profile, envelope: envelope)
            let userID = try ItemRecord.string(db, key.sibling(.appleUserID), envelope: envelope)
            guard let profile = UserProfile(sealedForm: item.secret, userID: userID) else {
                throw TokenStoreError(.databaseCorrupt, "The account's sealed profile does not decode.")
            }
            return profile
        } }
    }

    /// Counts of what the store holds, without opening anything.
    public func counts() throws -> StoreCounts {
        try connection.read { db, _ in
            StoreCounts(
                items: try ItemRecord.count(db),
                accounts: Int(try db.scalarInt("SELECT count(DISTINCT account_ref) FROM items") ?? 0),
                pendingRevocations: try OutboxRecord.count(db),
                credentialStates: try CredentialRecord.count(db))
        }
    }

    /// The entries of the revocation outbox, oldest first; only those due by `dueBy` when
    /// given. Flagged (permanently failed) entries are included only when `includeFailed` is true.
    public func pendingRevocations(dueBy: Date? = nil, includeFailed: Bool = true) throws -> [PendingRevocation] {
        var conditions: [String] = []
        var arguments: [SQLValue] = []
        if let dueBy {
            conditions.append("next_attempt_at <= ?")
            arguments.append(.int(Timestamp.millis(from: dueBy)))
        }
        if !includeFailed { conditions.append("failed_code IS NULL") }
        return try connection.read { db, envelope in
            try OutboxRecord.entries(
                db, where: conditions.isEmpty ? "1" : conditions.joined(separator: " AND "), arguments, envelope: envelope)
        }
    }
}
