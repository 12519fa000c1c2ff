import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// row_swap: sealed blobs moved between accounts, kinds, services, tables (items ↔
/// pending_revocations ↔ credential_states ↔ data_keys.key_check), between outbox entries,
/// and from another store. Every moved blob must be rejected where it lands.
@Suite("Reliability: row_swap", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RowSwapTests {
    /// One sealed value in the store: where it is and how the API reads it.
    struct Slot {
        let name: String
        let table: String
        let rowKeyColumn: String
        let blobColumn: String
        let rowKey: [UInt8]
        let read: (TokenStore) -> String
    }

    /// A store with items of every kind for two accounts in two services, three outbox
    /// entries and two credential states.
    static func populate(_ store: TokenStore) throws {
        try store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("alice-rt"), appleUserID: "alice-user",
            accessToken: AccessTokenEntry(token: secret("alice-at"), expiresAt: Date() + 3600, scopes: ["openid"]))
        try store.set(secret("alice-generic"), for: key("alice", .generic), attributes: .init(label: "l"))
        try store.ledger.saveSignIn(account: "bob", refreshToken: secret("bob-rt"), appleUserID: "bob-user", accessToken: nil)
        try store.set(secret("alice-rt-svc2"), for: key("alice", service: "svc2"))
        for round in 0..<2 {
            try store.ledger.saveSignIn(account: "carol", refreshToken: secret("carol-rt-\(round)"), appleUserID: "carol-user", accessToken: nil)
            _ = try store.ledger.beginLogout(account: "carol")
        }
        try store.set(secret("dave-rt"), for: key("dave"))
        _ = try store.ledger.beginLogout(account: "dave")
    }

    static func slots(_ store: TokenStore, _ raw: Database) throws -> [Slot] {
        var slots: [Slot] = []
        let items: [(String, ItemKey)] = [
            ("alice/rt", key("alice")), ("alice/apple-id", key("alice", .appleUserID)),
            ("alice/generic", key("alice", .generic)), ("bob/rt", key("bob")), ("bob/apple-id", key("bob", .appleUserID)),
            ("svc2/alice/rt", key("alice", service: "svc2")),
        ]
        for (name, itemKey) in items {
            slots.append(Slot(
                name: "items:\(name)", table: "items", rowKeyColumn: "lookup", blobColumn: "sealed",
                rowKey: store.connection.envelope.itemLookup(itemKey),
                read: { s in outcomeCode { if try s.item(for: itemKey) == nil { throw Absent() } } }))
        }
        // The access token lives in its own table since schema version 6.
        slots.append(Slot(
            name: "access_tokens:alice", table: "access_tokens", rowKeyColumn: "lookup", blobColumn: "sealed",
            rowKey: store.connection.envelope.accessTokenLookup(AccessTokenKey(account: "alice", audience: nil, scopes: ["openid"])),
            read: { s in verifyOutcome(s) }))
        var entries: [[UInt8]] = []
        try raw.forEachRow("SELECT entry_id FROM pending_revocations ORDER BY created_at, entry_id") { entries.append($0.blob(0)) }
        for (index, entry) in entries.enumerated() {
            slots.append(Slot(
                name: "outbox:\(index)", table: "pending_revocations", rowKeyColumn: "entry_id", blobColumn: "sealed",
                rowKey: entry, read: { s in outcomeCode { _ = try s.pendingRevocations() } }))
        }
        for user in ["alice-user", "bob-user", "carol-user"] {
            slots.append(Slot(
                name: "credential:\(user)", table: "credential_states", rowKeyColumn: "user_ref", blobColumn: "sealed_user",
                rowKey: store.connection.envelope.userRef(user), read: { s in verifyOutcome(s) }))
        }
        let keyID = try #require(try raw.firstRow("SELECT key_id FROM data_keys WHERE status = 'active'", []) { $0.blob(0) })
        slots.append(Slot(
            name: "data_keys:key_check", table: "data_keys", rowKeyColumn: "key_id", blobColumn: "key_check", rowKey: keyID,
            read: { s in
                outcomeCode { try s.connection.withDatabase { db in try KeyCheck.verify(database: db, storeID: s.connection.envelope.storeID, key: s.connection.envelope.key) } }
            }))
        return slots
    }

    @Test("blobs moved between accounts, kinds, services, tables, outbox entries and stores are all rejected")
    func rowSwap() throws {
        let t = try TestStore()
        try Self.populate(t.store)
        let raw = try t.rawDatabase()
        try raw.execute("PRAGMA synchronous = OFF")
        let slots = try Self.slots(t.store, raw)
        #expect(slots.count == 14)
        for slot in slots { #expect(slot.read(t.store) == "ok", "\(slot.name) reads before the swaps") }

        func blob(_ slot: Slot) throws -> [UInt8] {
            try #require(try raw.firstRow(
                "SELECT \(slot.blobColumn) FROM \(slot.table) WHERE \(slot.rowKeyColumn) = ?", [.blob(slot.rowKey)]) { $0.blob(0) })
        }
        func put(_ value: [UInt8], into slot: Slot) throws {
            try raw.run(
                "UPDATE \(slot.table) SET \(slot.blobColumn) = ? WHERE \(slot.rowKeyColumn) = ?", [.blob(value), .blob(slot.rowKey)])
        }
        var tried = 0, accepted = 0, wrongCode = 0
        var kinds: [String: Int] = [:]
        func expectRejected(_ slot: Slot, _ what: String, expected: TokenStoreError.Code = .integrityCheckFailed) {
            tried += 1
            let result = slot.read(t.store)
            if result == "ok" {
                accepted += 1
                Issue.record("\(what): accepted")
            } else if result != expected.rawValue {
                wrongCode += 1
                Issue.record("\(what): \(result), expected \(expected)")
            }
        }

        // Every blob into every other slot.
        let originals = try slots.map(blob)
        for (to, destination) in slots.enumerated() {
            for (from, source) in slots.enumerated() where from != to {
                try put(originals[from], into: destination)
                let kind = source.table != destination.table ? "table" : "same_table"
                kinds[kind, default: 0] += 1
                // A foreign blob in the key check: the key is intact (it still opens the rows), so
                // the damage is the database's, never "a different key" (review finding 5).
                expectRejected(
                    destination, "\(source.name) → \(destination.name)",
                    expected: destination.table == "data_keys" ? .databaseCorrupt : .integrityCheckFailed)
            }
            try put(originals[to], into: destination)
        }

        // An outbox entry moved to another account (its account_ref column).
        let aliceRef = t.store.connection.envelope.accountRef(AccountID("alice"))
        for slot in slots where slot.table == "pending_revocations" {
            let ref = try #require(try raw.firstRow(
                "SELECT account_ref FROM pending_revocations WHERE entry_id = ?", [.blob(slot.rowKey)]) { $0.blob(0) })
            try raw.run("UPDATE pending_revocations SET account_ref = ? WHERE entry_id = ?", [.blob(aliceRef), .blob(slot.rowKey)])
            kinds["outbox_account", default: 0] += 1
            expectRejected(slot, "\(slot.name) moved to alice")
            try raw.run("UPDATE pending_revocations SET account_ref = ? WHERE entry_id = ?", [.blob(ref), .blob(slot.rowKey)])
        }
        // The kind column of an item changed to every other kind.
        for slot in slots where slot.table == "items" {
            let original = try #require(try raw.scalarInt("SELECT kind FROM items WHERE lookup = ?", [.blob(slot.rowKey)]))
            for code in ItemKind.allCases.map({ Int64($0.code) }) + [0, 99] where code != original {
                try raw.run("UPDATE items SET kind = ? WHERE lookup = ?", [.int(code), .blob(slot.rowKey)])
                kinds["kind_column", default: 0] += 1
                expectRejected(slot, "\(slot.name) kind \(original) → \(code)")
            }
            try raw.run("UPDATE items SET kind = ? WHERE lookup = ?", [.int(original), .blob(slot.rowKey)])
        }
        // A whole row copied under another account's lookup (bob gets alice's refresh token row).
        let bobLookup = t.store.connection.envelope.itemLookup(key("bob"))
        let aliceRow = try #require(try raw.firstRow(
            "SELECT account_ref, kind, key_id, sealed, created_at, updated_at FROM items WHERE lookup = ?",
            [.blob(t.store.connection.envelope.itemLookup(key("alice")))]) { ($0.blob(0), $0.int(1), $0.blob(2), $0.blob(3), $0.int(4), $0.int(5)) })
        let bobSlot = try #require(slots.first { $0.name == "items:bob/rt" })
        let bobBlob = try blob(bobSlot)
        try raw.run("UPDATE items SET account_ref = ?, sealed = ? WHERE lookup = ?", [.blob(aliceRow.0), .blob(aliceRow.3), .blob(bobLookup)])
        kinds["whole_row", default: 0] += 1
        expectRejected(bobSlot, "alice's whole row under bob's lookup")
        try raw.run(
            "UPDATE items SET account_ref = ?, sealed = ? WHERE lookup = ?",
            [.blob(t.store.connection.envelope.accountRef(AccountID("bob"))), .blob(bobBlob), .blob(bobLookup)])

        // Blobs from another store (another store id and data key), with and without their key id.
        let other = try TestStore()
        try Self.populate(other.store)
        let otherRaw = try other.rawDatabase()
        let otherSlots = try Self.slots(other.store, otherRaw)
        for (index, slot) in slots.enumerated() where slot.table != "data_keys" {
            let foreign = try #require(try otherRaw.firstRow(
                "SELECT \(slot.blobColumn), key_id FROM \(slot.table) WHERE \(slot.rowKeyColumn) = ?", [.blob(otherSlots[index].rowKey)]
            ) { ($0.blob(0), $0.blob(1)) })
            try put(foreign.0, into: slot)
            kinds["other_store", default: 0] += 1
            expectRejected(slot, "\(slot.name) from another store")
            try raw.run("UPDATE \(slot.table) SET key_id = ? WHERE \(slot.rowKeyColumn) = ?", [.blob(foreign.1), .blob(slot.rowKey)])
            kinds["other_store", default: 0] += 1
            expectRejected(slot, "\(slot.name) from another store with its key id")
            try raw.run(
                "UPDATE \(slot.table) SET key_id = ? WHERE \(slot.rowKeyColumn) = ?", [.blob(t.store.connection.envelope.key.keyID), .blob(slot.rowKey)])
            try put(originals[index], into: slot)
        }
        for slot in slots { #expect(slot.read(t.store) == "ok", "\(slot.name) reads again once restored") }
        #expect(try t.store.verify().isHealthy)

        Reliability.metric("row_swap", [
            "slots": slots.count, "swaps_tried": tried, "between_tables": kinds["table", default: 0],
            "within_table": kinds["same_table", default: 0], "outbox_moved": kinds["outbox_account", default: 0],
            "kind_column": kinds["kind_column", default: 0], "whole_row": kinds["whole_row", default: 0],
            "other_store": kinds["other_store", default: 0], "accepted": accepted, "wrong_error_code": wrongCode,
        ])
        #expect(accepted == 0)
        #expect(wrongCode == 0)
    }

    /// Not a blob swap but the same attack on the column kept in the clear: the credential
    /// state (`authorized` / `revoked`) is also sealed with the user id, and a clear column that
    /// disagrees with the sealed copy is detected.
    @Test("swapping the clear credential-state column between users is detected")
    func credentialStateColumnSwap() throws {
        let t = try TestStore()
        try t.store.recordCredentialState(.authorized, forUserID: "alice-user", reason: .signIn)
        try t.store.recordCredentialState(.revoked, forUserID: "bob-user", reason: .userLogout)
        let raw = try t.rawDatabase()
        try raw.run("UPDATE credential_states SET state = 'authorized' WHERE user_ref = ?", [.blob(t.store.connection.envelope.userRef("bob-user"))])
        let result = outcomeCode {
            if try t.store.credentialState(forUserID: "bob-user") == .authorized { throw Absent() }
        }
        #expect(result == TokenStoreError.Code.integrityCheckFailed.rawValue, "a revoked user read back as \(result == "untyped" ? "authorized" : result)")
        let healthy = try t.store.verify().isHealthy
        #expect(!healthy, "verify() does not notice the changed state")
        #expect(try t.store.credentialState(forUserID: "alice-user") == .authorized, "the untouched row still reads")
    }
}

/// The error code of the first bad row `verify()` reports, or "ok".
func verifyOutcome(_ store: TokenStore) -> String {
    outcomeCode {
        let report = try store.verify()
        guard let bad = report.badRows.first else { return }
        throw TokenStoreError(TokenStoreError.Code(known: String(bad.reason.prefix { $0 != ":" })) ?? .ioError, "verify")
    }
}
