import Foundation

/// A cached access token with its expiry and granted scopes.
public struct AccessTokenEntry: Sendable {
    public let token: SecretBytes
    public let expiresAt: Date
    public let scopes: [String]

    public init(token: SecretBytes, expiresAt: Date, scopes: [String]) {
        self.token = token
        self.expiresAt = expiresAt
        self.scopes = scopes
    }

    /// Whether the store accepts this entry in its cache (size, scopes, expiry within the
    /// store's limits). A session stores a refresh token without the cache entry rather than
    /// lose the refresh token over an access token it cannot cache.
    public var isCacheable: Bool {
        (try? TokenStore.validate(secret: token, attributes: .init(expiresAt: expiresAt, scopes: scopes))) != nil
    }
}

/// What ``TokenStore/replaceRefreshToken(account:service:presented:with:accessToken:)`` did.
public enum RefreshTokenReplacement: Sendable, Equatable {
    /// The new tokens are stored; the old refresh token is gone.
    case stored
    /// The account was logged out (or signed in anew) meanwhile: nothing was stored for it,
    /// and a new refresh token, if any, was queued for revocation.
    case superseded
}

extension TokenStore {
    /// Checks the names a sign-in will store, as ``saveSignIn(account:service:refreshToken:appleUserID:accessToken:)``
    /// does, so that a session can refuse bad input before it asks the server for tokens.
    /// - Throws: `invalidInput`.
    public static func validateSignIn(account: String, service: String = ItemKey.defaultService, appleUserID: String) throws {
        try validate(ItemKey(service: service, account: account, kind: .refreshToken))
        try validate(userID: appleUserID)
    }

    /// Stores a sign-in in one transaction: the refresh token, the Apple user id and the
    /// access-token cache of `account`, and records the user as `authorized`.
    ///
    /// A refresh token the account already held is never dropped: it goes to the
    /// pending-revocation outbox, and when it belonged to another Apple user, that user is
    /// recorded `revoked` (reason `replacedBySignIn`, revocation pending).
    /// - Returns: whether a previous refresh token was queued for revocation (call
    ///   `resumePendingRevocations()` of the session layer to send it).
    /// - Throws: `invalidInput`, storage errors. Nothing is stored when it throws.
    @discardableResult
    public func saveSignIn(
        account: String, service: String = ItemKey.defaultService, refreshToken: SecretBytes,
        appleUserID: String, accessToken: AccessTokenEntry?
    ) throws -> Bool {
        let rtKey = ItemKey(service: service, account: account, kind: .refreshToken)
        try Self.validateSignIn(account: account, service: service, appleUserID: appleUserID)
        try Self.validate(secret: refreshToken, attributes: .init())
        if let accessToken { try Self.validate(secret: accessToken.token, attributes: .init(expiresAt: accessToken.expiresAt, scopes: accessToken.scopes)) }
        return try write { db in
            var queued = false
            if let previous = try readItem(db, key: rtKey), previous.secret != refreshToken {
                let previousUser = try readItem(
                    db, key: ItemKey(service: service, account: account, kind: .appleUserID))?.secret.stringValue()
                try insertPendingRevocation(
                    db, service: service, account: account, appleUserID: previousUser, token: previous.secret,
                    reason: .replacedBySignIn)
                if let previousUser, previousUser != appleUserID {
                    try recordState(
                        db, userID: previousUser, to: .revoked, reason: .replacedBySignIn,
                        detail: CredentialStateDetail.remoteRevocationPending)
                }
                queued = true
            }
            try upsertItem(db, key: rtKey, secret: refreshToken, attributes: .init())
            try upsertItem(
                db, key: ItemKey(service: service, account: account, kind: .appleUserID),
                secret: SecretBytes(utf8: appleUserID), attributes: .init())
            let atKey = ItemKey(service: service, account: account, kind: .accessToken)
            if let accessToken {
                try upsertItem(db, key: atKey, secret: accessToken.token,
                               attributes: .init(expiresAt: accessToken.expiresAt, scopes: accessToken.scopes))
            } else {
                try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(atKey))])
            }
            try clearLogoutMark(db, service: service, account: account)
            try recordState(db, userID: appleUserID, to: .authorized, reason: .signIn, detail: nil)
            return queued
        }
    }

    /// The account's refresh token, or `nil` when none is stored (or a logout has taken it).
    public func refreshToken(account: String, service: String = ItemKey.defaultService) throws -> SecretBytes? {
        try secret(for: ItemKey(service: service, account: account, kind: .refreshToken))
    }

    /// The account's Apple user id, or `nil`.
    /// - Note: the id is returned as a `String`: it is an identifier, not a credential.
    public func appleUserID(account: String, service: String = ItemKey.defaultService) throws -> String? {
        try secret(for: ItemKey(service: service, account: account, kind: .appleUserID))?.stringValue()
    }

    /// The account's cached access token, or `nil` (none, or the account is logging out).
    public func cachedAccessToken(account: String, service: String = ItemKey.defaultService) throws -> AccessTokenEntry? {
        let key = ItemKey(service: service, account: account, kind: .accessToken)
        try Self.validate(key)
        return try read { db in
            guard try !isLoggingOut(db, service: service, account: account),
                  let item = try readItem(db, key: key), let expiresAt = item.attributes.expiresAt
            else { return nil }
            return AccessTokenEntry(token: item.secret, expiresAt: expiresAt, scopes: item.attributes.scopes)
        }
    }

    /// Stores the result of a refresh in one durable transaction, but only if the refresh
    /// token presented to the server is still the account's (compare-and-swap).
    ///
    /// With rotation, `newRefreshToken` replaces the presented one; without, the presented
    /// one is kept. When the account was logged out or signed in anew meanwhile, nothing is
    /// stored and a new refresh token goes to the revocation outbox (``RefreshTokenReplacement/superseded``).
    /// A `nil` access token clears the account's cache entry.
    public func replaceRefreshToken(
        account: String, service: String = ItemKey.defaultService, presented: SecretBytes,
        with newRefreshToken: SecretBytes?, accessToken: AccessTokenEntry?
    ) throws -> RefreshTokenReplacement {
        let rtKey = ItemKey(service: service, account: account, kind: .refreshToken)
        try Self.validate(rtKey)
        if let accessToken {
            try Self.validate(secret: accessToken.token, attributes: .init(expiresAt: accessToken.expiresAt, scopes: accessToken.scopes))
        }
        if let newRefreshToken { try Self.validate(secret: newRefreshToken, attributes: .init()) }
        return try write { db in
            let current = try readItem(db, key: rtKey)
            if let current, current.secret == presented, try !isLoggingOut(db, service: service, account: account) {
                if let newRefreshToken {
                    try upsertItem(db, key: rtKey, secret: newRefreshToken, attributes: .init())
                }
                let atKey = ItemKey(service: service, account: account, kind: .accessToken)
                if let accessToken {
                    try upsertItem(
                        db, key: atKey, secret: accessToken.token,
                        attributes: .init(expiresAt: accessToken.expiresAt, scopes: accessToken.scopes))
                } else {
                    try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(atKey))])
                }
                return .stored
            }
            if let newRefreshToken {
                let userID = try readItem(db, key: ItemKey(service: service, account: account, kind: .appleUserID))?.secret.stringValue()
                try insertPendingRevocation(
                    db, service: service, account: account, appleUserID: userID, token: newRefreshToken, reason: .userLogout)
            }
            return .superseded
        }
    }

    /// The server refused `presented` (`invalid_grant`): stop offering it. If it is still the
    /// account's refresh token, it and the access-token cache are deleted and the user is
    /// recorded `revoked` with reason `refreshRejected`. Returns whether anything changed.
    @discardableResult
    public func rejectRefreshToken(
        account: String, service: String = ItemKey.defaultService, presented: SecretBytes
    ) throws -> Bool {
        let rtKey = ItemKey(service: service, account: account, kind: .refreshToken)
        try Self.validate(rtKey)
        return try write { db in
            guard let current = try readItem(db, key: rtKey), current.secret == presented else { return false }
            try db.run("DELETE FROM items WHERE lookup = ?", [.blob(itemLookup(rtKey))])
            try db.run("DELETE FROM items WHERE lookup = ?",
                       [.blob(itemLookup(ItemKey(service: service, account: account, kind: .accessToken)))])
            if let userID = try readItem(db, key: ItemKey(service: service, account: account, kind: .appleUserID))?.secret.stringValue() {
                try recordState(db, userID: userID, to: .revoked, reason: .refreshRejected, detail: nil)
            }
            return true
        }
    }

    /// The accounts whose stored Apple user id is `userID`.
    public func accounts(forAppleUserID userID: String) throws -> [(service: String, account: String)] {
        try Self.validate(userID: userID)
        var found: [(String, String)] = []
        try read { db in
            try db.forEachRow(
                "SELECT lookup, kind, key_id, sealed, created_at, updated_at FROM items WHERE kind = ?",
                [.int(Int64(ItemKind.appleUserID.code))]
            ) { row in
                let item = try decodeItem(row)
                if item.secret == SecretBytes(utf8: userID) { found.append((item.key.service, item.key.account)) }
            }
        }
        return found
    }

    // MARK: Logout marks

    func isLoggingOut(_ db: Database, service: String, account: String) throws -> Bool {
        (try db.scalarInt(
            "SELECT logging_out FROM account_marks WHERE account_ref = ?",
            [.blob(accountRef(service: service, account: account))]) ?? 0) != 0
    }

    func clearLogoutMark(_ db: Database, service: String, account: String) throws {
        try db.run("DELETE FROM account_marks WHERE account_ref = ?", [.blob(accountRef(service: service, account: account))])
    }
}
