import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

extension TokenStore {
    // MARK: Server documents and bound endpoints (for the session layer)

    /// The discovery document kept for `issuer`, or `nil`.
    /// - Throws: `integrityCheckFailed` when its row was altered, moved or swapped: nothing
    ///   read back unchecked decides where a token goes.
    package func serverDocument(issuer: String) throws -> ServerDocument? {
        try connection.read { db, envelope in try DiscoveryRecord.find(db, issuer: issuer, envelope: envelope) }
    }

    /// Every discovery document kept (for `tokenctl status`).
    package func serverDocuments() throws -> [ServerDocument] {
        try connection.read { db, envelope in try DiscoveryRecord.all(db, envelope: envelope) }
    }

    /// Keeps `document` sealed for its issuer, replacing the one kept before, and removes the
    /// unsealed copy earlier versions kept beside the store.
    /// - Throws: `invalidInput` (empty or over 256 KiB), storage errors (a read-only store).
    package func saveServerDocument(_ document: ServerDocument) throws {
        try connection.write { db, envelope in try DiscoveryRecord.upsert(db, document, envelope: envelope) }
        Self.removeLegacyDiscoveryFile(of: path)
    }

    /// Removes every discovery document kept, also rows that do not open (altered, or under
    /// another key): the documents are the servers' public data, fetched again when next needed.
    /// - Returns: how many rows were removed.
    @discardableResult
    package func discardServerDocuments() throws -> Int {
        try connection.write { db, _ in
            guard try DiscoveryRecord.tableExists(db) else { return 0 }
            try db.run("DELETE FROM discovery")
            return db.changes
        }
    }

    /// The account's refresh token and the endpoints it is bound to (`nil` for a token stored
    /// before endpoints were recorded, or through the item API), or `nil` when none is stored.
    package func boundRefreshToken(account: AccountID) throws -> (token: SecretBytes, endpoints: ServerEndpoints?)? {
        let key = ItemKey(account: account, kind: .refreshToken)
        try Self.validate(key)
        // A renewal reads the refresh token: under userPresence, asked first (nothing is sent or changed when denied).
        return try connection.withPresence {
            try connection.read { db, envelope in
                guard let found = try ItemRecord.find(db, key, envelope: envelope) else { return nil }
                try connection.requirePresence(for: .refreshToken, envelope: envelope)
                return (found.secret, found.endpoints)
            }
        }
    }

    /// Removes `STORE.discovery.json` (and its temporary file) when it is a regular file of
    /// this user's: a copy no version reads any more. Anything else at that name is left alone.
    static func removeLegacyDiscoveryFile(of databasePath: String) {
        for file in [FileLayout.legacyDiscoveryPath(of: databasePath), FileLayout.legacyDiscoveryPath(of: databasePath) + ".tmp"] {
            var info = stat()
            guard lstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid() else { continue }
            unlink(file)
        }
    }
}
