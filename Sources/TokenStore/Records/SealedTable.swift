/// A table whose rows are sealed under the data key.
///
/// Each conforming record type is the one place that seals, opens and checks its rows; the
/// store's reads, ``TokenStore/verify(progress:)``, key rotation, reset and the "is anything
/// sealed left" questions all go through ``SealedTables/all``. Adding a sealed table means one
/// new record type (listed there) plus its migration.
protocol SealedTable: Sendable {
    /// The table's name in SQL and in verification reports.
    static var table: String { get }
    /// Whether its rows hold secrets (their count decides whether a crypto-erase is due).
    static var holdsSecrets: Bool { get }
    /// The rotation's work table for this table (re-sealed copies, dropped at the switch).
    static var rotationTable: String { get }

    /// Opens and checks every row, handing each row's short id and check to `check`
    /// (verification: one bad row does not stop the walk).
    static func verifyRows(_ db: Database, envelope: Envelope, _ check: ([UInt8], () throws -> Void) -> Void) throws

    /// Re-seals up to `limit` live rows after `cursor` (by row key) that have no up-to-date copy
    /// in the work table, under `next`, and records how their keyed hashes map in
    /// `rotation_refs`. Returns how many, and the last row key.
    static func resealStale(
        _ db: Database, from current: Envelope, to next: Envelope, after cursor: [UInt8], limit: Int
    ) throws -> (count: Int, last: [UInt8]?)

    /// Swaps the re-sealed copies in for the rows sealed under `current`, in the switch
    /// transaction. Throws `integrityCheckFailed` when a row has no copy.
    static func switchIn(_ db: Database, from current: Envelope, to next: Envelope) throws
}

extension SealedTable {
    /// The table's rows; 0 for a table a store's older schema does not have yet (a store is
    /// looked at before it is migrated).
    static func count(_ db: Database) throws -> Int {
        let exists = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)])
        guard (exists ?? 0) > 0 else { return 0 }
        return Int(try db.scalarInt("SELECT count(*) FROM \(table)") ?? 0)
    }

    static func rotationCopies(_ db: Database) throws -> Int {
        guard try !SealedTables.existing([rotationTable], in: db).isEmpty else { return 0 }
        return Int(try db.scalarInt("SELECT count(*) FROM \(rotationTable)") ?? 0)
    }

    static func switchMismatch() -> TokenStoreError {
        TokenStoreError(
            .integrityCheckFailed, "The key switch found \(table) rows without a re-sealed copy; nothing was switched.")
    }

    /// Remembers that keyed hash `old` becomes `new` under the next key (for the tables that
    /// refer to rows by hash: logout marks, the credential history).
    static func mapRef(_ db: Database, _ domain: LookupDomain, from old: [UInt8], to new: [UInt8]) throws {
        try db.run(
            "INSERT OR IGNORE INTO rotation_refs(domain, old_ref, new_ref) VALUES (?, ?, ?)",
            [.int(Int64(domain.rawValue)), .blob(old), .blob(new)])
    }
}

/// Every sealed table of the store.
enum SealedTables {
    static let all: [any SealedTable.Type] = [
        ItemRecord.self, AccessTokenRecord.self, OutboxRecord.self, CredentialRecord.self, DPoPStateRecord.self,
        DiscoveryRecord.self,
    ]

    /// Every rotation work table (the sealed tables' and the keyed-hash map).
    static var rotationTables: [String] { all.map { $0.rotationTable } + ["rotation_refs"] }

    /// Those of `tables` the store's schema has: a store a test left below the newest version
    /// (or one looked at before it is migrated) lacks the newer ones (`dpop_state`, version 12).
    static func existing(_ tables: [String], in db: Database) throws -> [String] {
        try tables.filter {
            (try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text($0)]) ?? 0) > 0
        }
    }

    /// Rows of all sealed tables.
    static func rowCount(_ db: Database) throws -> Int {
        try all.reduce(0) { $0 + (try $1.count(db)) }
    }

    /// True when no table that holds secrets has a row.
    static func holdNoSecrets(_ db: Database) throws -> Bool {
        try all.filter { $0.holdsSecrets }.allSatisfy { try $0.count(db) == 0 }
    }
}
