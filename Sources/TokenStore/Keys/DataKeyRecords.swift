import FoundationEssentials

/// The store's key records as the open reads them: the `data_keys` rows and the store id they
/// are bound to (`store_info.store_id`). Reads only, in the caller's transaction; making a key is
/// ``KeySetup``'s, rotating one ``KeyRotation``'s.
enum DataKeyRecords {
    /// The store's random id; nil before its row is made (a new store).
    static func storeID(_ db: Database) throws -> [UInt8]? {
        try db.firstRow("SELECT store_id FROM store_info WHERE id = 1", [], { $0.blob(0) })
    }

    /// The active key's id; nil when no key is active.
    static func activeKeyID(_ db: Database) throws -> [UInt8]? {
        try db.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", [], { $0.blob(0) })
    }

    /// Whether a key record is active.
    static func hasActiveKey(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM data_keys WHERE status = 'active'") ?? 0) > 0
    }

    /// Whether the store holds key records (under any status) or sealed rows: it was used, so a
    /// missing active key is lost or damaged, never a first run.
    static func holdKeysOrSealedRows(_ db: Database) throws -> Bool {
        try SealedTables.rowCount(db) + Int(try db.scalarInt("SELECT count(*) FROM data_keys") ?? 0) > 0
    }

    /// Whether the file at `path` holds no key record (a first open failed before its key was
    /// made: no `data_keys` table yet, or an empty one); false when that cannot be told.
    static func noneRecorded(atPath path: String) -> Bool {
        do {
            let db = try Database.openForReading(path: path)
            return try db.readTransaction {
                let tables = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'data_keys'") ?? 0
                if tables == 0 { return true }
                return try db.scalarInt("SELECT count(*) FROM data_keys") == 0
            }
        } catch {
            return false  // unreadable now: keeping the file is the safe side
        }
    }
}
