import FoundationEssentials

/// The store epoch: a counter raised by every transaction that makes one of the changes
/// ``EpochRaisingChange`` lists (an outbox entry queued, a user recorded `revoked`, local entries
/// cleared, a key switch; reported by the record layer, a reset keeps it), kept in the
/// database file (`store_info.epoch`, authenticated by `epoch_mac` under the data key's MAC
/// subkey) and in the key provider (``KeyProvider/storeEpoch(storeID:)``).
///
/// Order of a raise: the file's epoch goes up in the same transaction as the change it
/// protects; after the commit the key provider's epoch is raised to it. At open:
/// - file < provider: the file is an older copy (restored from a backup, a sync tool, or
///   swapped by someone with access to the file only): `storeRolledBack`, nothing changed;
/// - file > provider: a crash (or a failed provider call) came between the two steps: the
///   provider is raised to match, never an error;
/// - equal: nothing to do.
/// A store from before schema version 9 has no epoch on either side (0 = 0).
enum StoreEpoch {
    static let table = "store_info"

    /// Whether the file has the epoch columns (a store a test keeps below schema version 9 has not).
    static func hasColumns(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM pragma_table_info('store_info') WHERE name = 'epoch_mac'") ?? 0) > 0
    }

    /// The file's epoch, checked against its MAC under `envelope`'s key; 0 when none was ever written.
    /// - Throws: `integrityCheckFailed` when the value or its MAC was altered.
    static func read(_ db: Database, envelope: Envelope) throws -> UInt64 {
        let row = try db.firstRow("SELECT epoch, epoch_mac FROM store_info WHERE id = 1", []) { row in
            (row.isNull(0) ? nil : row.int(0), row.isNull(1) ? nil : row.blob(1))
        }
        guard let (epoch, mac) = row else { return 0 }
        switch (epoch, mac) {
        case (nil, nil):
            return 0
        case (let epoch?, let mac?) where epoch >= 0 && MACField.equal(mac, Self.mac(UInt64(epoch), envelope: envelope)):
            return UInt64(epoch)
        default:
            throw TokenStoreError(
                .integrityCheckFailed, "The store's epoch record was altered (its MAC does not match).",
                hint: "Restore the newest copy of the store file, or start over with resetStore.")
        }
    }

    /// The epoch as recorded, without checking its MAC (for `inspect`, which has no key).
    static func unchecked(_ db: Database) throws -> UInt64? {
        guard try hasColumns(db) else { return nil }
        return try db.firstRow("SELECT epoch FROM store_info WHERE id = 1", []) { $0.isNull(0) ? 0 : UInt64(max(0, $0.int(0))) }
    }

    /// Writes `epoch` with its MAC under `envelope`'s key (inside the caller's transaction).
    static func write(_ db: Database, _ epoch: UInt64, envelope: Envelope) throws {
        try db.run(
            "UPDATE store_info SET epoch = ?, epoch_mac = ? WHERE id = 1",
            [.int(Int64(epoch)), .blob(mac(epoch, envelope: envelope))])
    }

    static func mac(_ epoch: UInt64, envelope: Envelope) -> [UInt8] {
        envelope.mac(.storeEpochMAC, [MACField.name(table), envelope.storeID, MACField.int(Int64(epoch))])
    }

    /// At open, with the store's active key: compares the file's epoch with the provider's.
    /// Heals a provider left behind (file ahead) and refuses an older file. `providerEpoch`: the
    /// provider's epoch when it was read with the key (before the file's, which is safe: the
    /// provider's is raised only after the file's); nil: asked here.
    /// - Returns: both epochs, as compared (after a heal, the provider's is the file's).
    /// - Throws: `storeRolledBack` (nothing is changed), `integrityCheckFailed`, the provider's errors.
    @discardableResult
    static func checkAtOpen(
        _ db: Database, envelope: Envelope, provider: any KeyProvider, appID: String, logger: TokenStoreLogger,
        providerEpoch: UInt64? = nil
    ) throws -> StoreEpochStatus {
        guard try hasColumns(db) else { return StoreEpochStatus(file: 0, keyProvider: 0) }
        let storeID = Hex.encode(envelope.storeID)
        let file = try read(db, envelope: envelope)
        let kept = try providerEpoch ?? provider.storeEpoch(storeID: storeID)
        if file < kept {
            // Counted only here, to word the error: a count at every open reads every page of
            // `items` and made the open grow with the store.
            let (outbox, refreshTokens) = try db.readTransaction {
                (try db.scalarInt("SELECT count(*) FROM pending_revocations") ?? 0,
                 try db.scalarInt("SELECT count(*) FROM items WHERE kind = ?", [.int(Int64(ItemKind.refreshToken.code))]) ?? 0)
            }
            throw rolledBack(file: file, keyProvider: kept, outbox: Int(outbox), refreshTokens: Int(refreshTokens))
        }
        if file > kept {
            do {
                try provider.raiseStoreEpoch(storeID: storeID, appID: appID, to: file)
                logger.info("raised the key provider's store epoch to the file's (a raise was interrupted)")
            } catch {
                logger.info(
                    "could not raise the key provider's store epoch to the file's; the next open tries again",
                    metadata: ["error": TokenStoreError.code(of: error)])
                return StoreEpochStatus(file: file, keyProvider: kept)
            }
        }
        return StoreEpochStatus(file: file, keyProvider: file)
    }

    /// The error for a file older than its provider's epoch: what it means and what it holds
    /// that can no longer be trusted (counts only).
    static func rolledBack(file: UInt64, keyProvider: UInt64, outbox: Int, refreshTokens: Int) -> TokenStoreError {
        TokenStoreError(
            .storeRolledBack,
            "The store file is older than its epoch in the key provider (file \(file), key provider \(keyProvider)): "
                + "it was restored from an older copy, so the logouts, key rotations or resets made since are undone in it. "
                + "Its \(outbox) pending revocation(s) cannot be proven complete (tokens queued for revocation after the copy "
                + "was taken are missing), and its \(refreshTokens) refresh token(s) may belong to accounts logged out since. "
                + "Nothing was changed.",
            hint: "Restore the newest copy of the store file; if there is none, start over with resetStore "
                + "(tokenctl reset --yes), which deletes the stored secrets and keeps the credential history.")
    }
}

/// The store epoch on both sides, as ``TokenStore/epochStatus()`` and `tokenctl verify` report it.
public struct StoreEpochStatus: Sendable, Equatable {
    /// The epoch recorded in the database file (authenticated).
    public let file: UInt64
    /// The epoch the key provider holds for the store.
    public let keyProvider: UInt64
    /// Whether the file is an older copy than the key provider expects.
    public var isRolledBack: Bool { file < keyProvider }
}
