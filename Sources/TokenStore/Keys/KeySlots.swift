import FoundationEssentials

/// The store's key slots as recorded (schema version 16, `key_slots` and `key_slot_set`): each
/// row one way to the data key, authenticated under the data key's MAC subkey; the set row
/// authenticates which rows exist. A store with no row has one implicit slot, its recorded key
/// provider (``KeyProviderRecord``), filed under the data key's own id.
///
/// Read without the key before the open (which kinds may open the store, where their keys are
/// filed), checked with it after (``check(_:envelope:)``): an edited, swapped, added or removed
/// row is `integrityCheckFailed`.
enum KeySlots {
    static let table = "key_slots"

    /// One recorded slot, as read (checked or not: see the caller).
    struct Row: Equatable {
        let id: Int64
        let kind: KeyProviderKind
        /// The key id the slot's provider files the data key under.
        let keyRef: [UInt8]
        /// What the slot's provider keeps (or `sealed` wraps) when the table holds it (a recovery
        /// key, a TPM PIN): the data key, or for a slot with a ``box`` the box's secret half.
        let sealed: [UInt8]?
        let createdAt: Int64
        let mac: [UInt8]
        /// The slot's box (schema version 17): the provider keeps the secret half of this key
        /// pair, and the data key is sealed to its public half (``SlotBox``). Nil: the provider
        /// keeps the data key itself (the store's first slot, slots added at version 16).
        var box: Box?
    }

    struct Box: Equatable {
        let publicKey: [UInt8]
        let boxedKey: [UInt8]
    }

    /// Whether the file has the tables (schema version 16 or later).
    static func hasTables(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'key_slots'") ?? 0) > 0
    }

    /// Whether the file has the boxes and the rotation tables (schema version 17 or later).
    static func hasBoxes(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'key_slot_boxes'") ?? 0) > 0
    }

    /// The recorded rows by id, not checked (no key yet); none without the table.
    static func unchecked(_ db: Database) throws -> [Row] {
        guard try hasTables(db) else { return [] }
        let boxes = try hasBoxes(db)
        let sql = boxes
            ? """
              SELECT s.id, s.kind, s.key_ref, s.sealed, s.created_at, s.mac, b.public_key, b.boxed_key
              FROM key_slots s LEFT JOIN key_slot_boxes b ON b.slot_id = s.id ORDER BY s.id
              """
            : "SELECT id, kind, key_ref, sealed, created_at, mac FROM key_slots ORDER BY id"
        var rows: [Row] = []
        try db.forEachRow(sql) { row in
            rows.append(Row(
                id: row.int(0), kind: KeyProviderKind(rawValue: row.text(1)), keyRef: row.blob(2),
                sealed: row.isNull(3) ? nil : row.blob(3), createdAt: row.int(4), mac: row.blob(5),
                box: boxes && !row.isNull(6) ? Box(publicKey: row.blob(6), boxedKey: row.blob(7)) : nil))
        }
        return rows
    }

    /// The rows of `kind`, not checked: where an open with a provider of that kind looks for
    /// the key. Empty when the store records no slot (the implicit one: the data key's own id).
    static func unchecked(_ db: Database, kind: KeyProviderKind) throws -> [Row] {
        try unchecked(db).filter { $0.kind == kind }
    }

    /// A row's MAC; a boxed row's covers its box too (a row without one keeps its version-16 MAC).
    static func mac(
        id: Int64, kind: KeyProviderKind, keyRef: [UInt8], sealed: [UInt8]?, createdAt: Int64, box: Box? = nil, envelope: Envelope
    ) -> [UInt8] {
        var fields = [
            MACField.name(table), envelope.storeID, MACField.int(id), Array(kind.rawValue.utf8), keyRef, MACField.blob(sealed),
            MACField.int(createdAt), envelope.keyID,
        ]
        if let box { fields += [MACField.name("key_slot_boxes"), box.publicKey, box.boxedKey] }
        return envelope.mac(.keySlotMAC, fields)
    }

    static func mac(_ row: Row, envelope: Envelope) -> [UInt8] {
        mac(id: row.id, kind: row.kind, keyRef: row.keyRef, sealed: row.sealed, createdAt: row.createdAt, box: row.box, envelope: envelope)
    }

    static func setMAC(ids: [Int64], envelope: Envelope) -> [UInt8] {
        envelope.mac(.keySlotSetMAC, [MACField.name("key_slot_set"), envelope.storeID, envelope.keyID] + ids.map(MACField.int))
    }

    /// With the store's key: every row and the set checked against their MACs.
    /// - Returns: the rows (empty for a store with only its implicit slot, or below version 16).
    /// - Throws: `integrityCheckFailed` when a row or the set was altered, added or removed.
    @discardableResult
    static func check(_ db: Database, envelope: Envelope) throws -> [Row] {
        guard try hasTables(db) else { return [] }
        let rows = try unchecked(db)
        let set = try db.firstRow("SELECT mac FROM key_slot_set WHERE id = 1", [], { $0.blob(0) })
        // A box whose slot row is gone is an added row as much as a row without a MAC.
        if try hasBoxes(db),
            (try db.scalarInt("SELECT count(*) FROM key_slot_boxes WHERE slot_id NOT IN (SELECT id FROM key_slots)") ?? 0) > 0
        {
            throw altered()
        }
        if rows.isEmpty, set == nil { return [] }
        for row in rows {
            guard MACField.equal(row.mac, mac(row, envelope: envelope)) else { throw altered() }
        }
        guard let set, MACField.equal(set, setMAC(ids: rows.map(\.id), envelope: envelope)) else { throw altered() }
        return rows
    }

    static func altered() -> TokenStoreError {
        TokenStoreError(
            .integrityCheckFailed,
            "The store's key slots were altered, added or removed outside this library (a MAC does not match); the store was not opened.",
            hint: "Restore the store file from a backup.")
    }

    /// Inside a write transaction with the key: adds a row and re-MACs the set; returns its id.
    static func insert(
        _ db: Database, kind: KeyProviderKind, keyRef: [UInt8], sealed: [UInt8]?, createdAt: Int64, box: Box? = nil,
        envelope: Envelope, id: Int64? = nil
    ) throws -> Int64 {
        let newID = try id ?? ((db.scalarInt("SELECT max(id) FROM key_slots") ?? 0) + 1)
        let row = Row(id: newID, kind: kind, keyRef: keyRef, sealed: sealed, createdAt: createdAt, mac: [], box: box)
        try db.run(
            "INSERT INTO key_slots(id, kind, key_ref, sealed, created_at, mac) VALUES (?, ?, ?, ?, ?, ?)",
            [.int(newID), .text(kind.rawValue), .blob(keyRef), sealed.map { .blob($0) } ?? .null, .int(createdAt),
             .blob(mac(row, envelope: envelope))])
        if let box {
            try db.run(
                "INSERT INTO key_slot_boxes(slot_id, public_key, boxed_key) VALUES (?, ?, ?)",
                [.int(newID), .blob(box.publicKey), .blob(box.boxedKey)])
        }
        try writeSet(db, envelope: envelope)
        return newID
    }

    /// Inside a write transaction with the key: removes a row (and its box) and re-MACs the set.
    static func delete(_ db: Database, id: Int64, envelope: Envelope) throws {
        try db.run("DELETE FROM key_slots WHERE id = ?", [.int(id)])
        if try hasBoxes(db) { try db.run("DELETE FROM key_slot_boxes WHERE slot_id = ?", [.int(id)]) }
        try writeSet(db, envelope: envelope)
    }

    static func writeSet(_ db: Database, envelope: Envelope) throws {
        var ids: [Int64] = []
        try db.forEachRow("SELECT id FROM key_slots ORDER BY id") { ids.append($0.int(0)) }
        try db.run(
            "INSERT INTO key_slot_set(id, mac) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET mac = excluded.mac",
            [.blob(setMAC(ids: ids, envelope: envelope))])
    }

    /// The slots as the store has them, checked: the recorded rows, or for a store without any
    /// the implicit one (its recorded provider, filed under the active key's id).
    static func effective(_ db: Database, envelope: Envelope, recordedKind: KeyProviderKind) throws -> [Row] {
        let rows = try check(db, envelope: envelope)
        guard rows.isEmpty else { return rows }
        let created = try db.firstRow("SELECT created_at FROM data_keys WHERE key_id = ?", [.blob(envelope.keyID)]) { $0.int(0) } ?? 0
        return [Row(id: 1, kind: recordedKind, keyRef: envelope.keyID, sealed: nil, createdAt: created, mac: [])]
    }

    /// Inside a write transaction with the key: a store with only its implicit slot gets it
    /// written as row 1 (nothing else changes: its key stays where it is).
    static func materialize(_ db: Database, envelope: Envelope, recordedKind: KeyProviderKind) throws -> [Row] {
        let rows = try effective(db, envelope: envelope, recordedKind: recordedKind)
        if rows.count == 1, rows[0].mac.isEmpty {
            let row = rows[0]
            _ = try insert(
                db, kind: row.kind, keyRef: row.keyRef, sealed: nil, createdAt: row.createdAt, envelope: envelope, id: 1)
            return try check(db, envelope: envelope)
        }
        return rows
    }
}
