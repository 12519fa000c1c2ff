import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What can be learnt about a store without its data key: for diagnostics such as
/// `tokenctl status`, and for reporting on a store that cannot be opened (locked keyring,
/// missing key). Holds no secret and no identifier: only counts, random ids, versions and
/// file modes.
public struct StoreInspection: Sendable {
    /// One schema migration, by number and name.
    public struct MigrationInfo: Sendable, Equatable {
        public let version: Int
        public let name: String
    }

    /// The mode bits of the store's files (e.g. `0o600`), `nil` for a file that does not exist.
    public struct FileModes: Sendable, Equatable {
        public let directory: Int?
        public let database: Int?
        public let wal: Int?
        public let shm: Int?
    }

    /// The database file inspected.
    public let path: String
    /// The newest migration applied to the file (0 for an empty file).
    public let schemaVersion: Int
    /// The newest schema version this library knows.
    public let supportedSchemaVersion: Int
    /// Migrations this library would apply at the next open, oldest first; empty when the
    /// file is newer than the library (`schemaVersion > supportedSchemaVersion`).
    public let pendingMigrations: [MigrationInfo]
    /// The store's random id (hex), or `nil` when the store was never initialised.
    public let storeIdentifier: String?
    /// The active data key's id (hex), or `nil` when the store has no key yet.
    public let activeKeyIdentifier: String?
    /// Data keys recorded by status (`active`, `next`, `retired`) and how many of each.
    public let dataKeys: [String: Int]
    /// What the store holds (counted, nothing opened).
    public let counts: StoreCounts
    /// Outbox entries the server refused for good (flagged).
    public let failedRevocations: Int
    /// Recorded credential-state transitions.
    public let historyEntries: Int
    /// The store epoch as the file records it, not checked (that needs the data key); `nil`
    /// below schema version 9. Compare it with ``KeyProvider/storeEpoch(storeID:)``: lower
    /// means the file is an older copy (see <doc:StoreEpoch>).
    public let epoch: UInt64?
    /// The kind of key provider the file records as holding its key, not checked (its MAC
    /// needs the data key); `nil` below schema version 10 or before a key was made. Opening the
    /// store with another kind is `wrongKeyProvider`.
    public let keyProvider: KeyProviderKind?
    public let fileModes: FileModes
    /// The access policy the file records, not checked (its MAC needs the data key); nil below
    /// schema version 15, or when the recorded name is not a policy.
    public internal(set) var accessPolicy: AccessPolicy? = nil
    /// Whether the file records a lock for every process (`tokenctl lock`), not checked.
    public internal(set) var lockedEverywhere = false
    /// The key slots as the file records them (not checked: no key), or the implicit first slot
    /// (the recorded provider) of a store with none; empty before a provider is recorded.
    public let keySlots: [KeySlot]
    /// The key id each recorded slot files the data key under, by slot id (hex).
    let slotKeyRefs: [Int: String]

    /// Where a provider of `kind` keeps this store's data key: under each recorded slot of that
    /// kind, or (a store without slot rows) under the active key's id.
    public func keyReferences(for kind: KeyProviderKind, appID: String) -> [DataKeyReference] {
        guard let storeIdentifier else { return [] }
        let refs = keySlots.filter { $0.kind == kind }.compactMap { slotKeyRefs[$0.id] }
        if slotKeyRefs.isEmpty { return activeKeyReference(appID: appID).map { [$0] } ?? [] }
        return refs.map { DataKeyReference(storeID: storeIdentifier, keyID: $0, appID: appID) }
    }

    /// The key-provider reference of the active data key, for asking a provider about it
    /// (``KeyProvider/availability(of:)``) without opening the store. `appID` only names the
    /// keyring item's label.
    public func activeKeyReference(appID: String) -> DataKeyReference? {
        guard let storeIdentifier, let activeKeyIdentifier else { return nil }
        return DataKeyReference(storeID: storeIdentifier, keyID: activeKeyIdentifier, appID: appID)
    }
}

extension TokenStore {
    /// Looks at the store file at `path` without the data key and without changing
    /// anything: opened read-only, no migration, no key made, no journal mode switched,
    /// nothing chmod-ed, no -wal/-shm side file added (see `Database.openForReading`).
    /// The layout is judged as by every open: what an open would refuse, this refuses.
    ///
    /// ```swift
    /// let inspection = try TokenStore.inspect(path: path)
    /// print(inspection.counts.items, inspection.pendingMigrations.map(\.version))
    /// ```
    /// - Throws: ``TokenStoreError`` — `ioError` (no file at `path`), `notAStore` (another
    ///   program's database), `unsafeFileLayout` (a symbolic link, not a regular file, owned by
    ///   another user, a directory others can write to, "permission denied"),
    ///   `databaseCorrupt`, `databaseBusy`, `migrationFailed` (an applied migration differs
    ///   from the embedded one).
    public static func inspect(path: String) throws -> StoreInspection {
        // The same judgement as every open (a directory others can write to is refused here too).
        switch try FileLayout.judge(databasePath: path) {
        case .missing:
            throw TokenStoreError(
                .ioError, "There is no store file at the given path.", cause: .posix(errno: ENOENT, operation: "lstat"))
        case .empty, .nonEmpty:
            break
        }
        // Another program's database is refused, not described; no side file is added.
        try StoreIdentity.check(path: path)
        let db = try Database.openForReading(path: path)
        let migrator = Migrator()
        return try db.readTransaction {
            let version = try migrator.currentVersion(in: db)
            let pending = version > migrator.latestVersion ? [] : try migrator.pendingMigrations(in: db)
            let hasSchema = try tableExists(db, "store_info")
            func count(_ sql: String) throws -> Int { hasSchema ? Int(try db.scalarInt(sql) ?? 0) : 0 }

            let storeID = hasSchema
                ? try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", [], { $0.blob(0) }) : nil
            let activeKeyID = hasSchema
                ? try db.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", [], { $0.blob(0) }) : nil
            var keys: [String: Int] = [:]
            if hasSchema {
                try db.forEachRow("SELECT status, count(*) FROM data_keys GROUP BY status") { row in
                    keys[row.text(0)] = Int(row.int(1))
                }
            }
            let counts = StoreCounts(
                items: try count("SELECT count(*) FROM items"),
                accounts: try count("SELECT count(DISTINCT account_ref) FROM items"),
                pendingRevocations: try count("SELECT count(*) FROM pending_revocations"),
                credentialStates: try count("SELECT count(*) FROM credential_states"))
            let directory = PathNames.directory(of: path)
            let provider = hasSchema ? try KeyProviderRecord.unchecked(db) : nil
            let rows = try KeySlots.unchecked(db)
            var slots = rows.map { KeySlot(id: Int($0.id), kind: $0.kind, createdAt: Timestamp.date(fromMillis: $0.createdAt)) }
            if rows.isEmpty, let provider, let activeKeyID {
                let created = try db.firstRow("SELECT created_at FROM data_keys WHERE key_id = ?", [.blob(activeKeyID)]) { $0.int(0) } ?? 0
                slots = [KeySlot(id: 1, kind: provider, createdAt: Timestamp.date(fromMillis: created))]
            }
            var inspection = StoreInspection(
                path: path, schemaVersion: version, supportedSchemaVersion: migrator.latestVersion,
                pendingMigrations: pending.map { .init(version: $0.version, name: $0.name) },
                storeIdentifier: storeID.map(Hex.encode), activeKeyIdentifier: activeKeyID.map(Hex.encode),
                dataKeys: keys, counts: counts,
                failedRevocations: try count("SELECT count(*) FROM pending_revocations WHERE failed_code IS NOT NULL"),
                historyEntries: try count("SELECT count(*) FROM credential_history"),
                epoch: hasSchema ? try StoreEpoch.unchecked(db) : nil,
                keyProvider: provider,
                fileModes: .init(
                    directory: FileLayout.mode(of: directory.isEmpty ? "." : directory),
                    database: FileLayout.mode(of: path), wal: FileLayout.mode(of: path + "-wal"),
                    shm: FileLayout.mode(of: path + "-shm")),
                keySlots: slots, slotKeyRefs: Dictionary(uniqueKeysWithValues: rows.map { (Int($0.id), Hex.encode($0.keyRef)) }))
            if hasSchema, try AccessPolicyRecord.hasColumns(db) {
                inspection.accessPolicy = try db.firstRow("SELECT access_policy FROM store_info WHERE id = 1", []) {
                    $0.isNull(0) ? nil : AccessPolicy(name: $0.text(0))
                } ?? nil
                inspection.lockedEverywhere = try AccessPolicyRecord.lockedUnchecked(db)
            }
            return inspection
        }
    }

    /// The migrations this library embeds, oldest first.
    public static var knownMigrations: [StoreInspection.MigrationInfo] {
        Migrator().migrations.map { .init(version: $0.version, name: $0.name) }
    }

    private static func tableExists(_ db: Database, _ name: String) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(name)]) ?? 0) > 0
    }
}
