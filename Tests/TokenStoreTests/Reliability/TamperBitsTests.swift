import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// tamper_bits: every bit of every sealed record of a small store is flipped in turn — the
/// version byte, nonce, ciphertext and tag of the blob, the `key_id` column and the row-key
/// column (lookup / entry_id / user_ref) — and each blob is truncated to every shorter length
/// and extended. Every change must read as `integrityCheckFailed` (for a moved row key: not
/// found by its old key, and `integrityCheckFailed` where it now is), never plaintext, never a crash.
/// `TAMPER_BITS_STRIDE=k` (CI's sanitizer runs: 5) flips every k-th bit and truncates to every k-th
/// length, each region still reached; `make test` flips every one.
@Suite("Reliability: tamper_bits", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TamperBitsTests {
    struct Target {
        let name: String
        let table: String
        let rowKeyColumn: String
        let keyIDColumn: String
        let blobColumn: String
        let rowKey: [UInt8]
        /// Reads the record through the API; returns "ok" only when plaintext came back.
        let read: (TokenStore) -> String
        /// Whether a moved row key makes the old-key read come back empty (not an error).
        let rowKeyReadsAbsent: Bool
    }

    @Test("every flipped bit, truncation and extension of a sealed record is integrityCheckFailed")
    func tamperBits() throws {
        let t = try TestStore()
        let store = t.store
        try store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("alice-refresh-token"), appleUserID: "alice-user",
            accessToken: AccessTokenEntry(token: secret("alice-access"), expiresAt: Date() + 3600, scopes: ["openid", "read"]))
        try store.set(secret("generic-secret"), for: key("alice", .generic), attributes: .init(label: "a label"))
        try store.set(secret("bob-refresh-token"), for: key("bob"))
        _ = try store.ledger.beginLogout(account: "bob")
        let raw = try t.rawDatabase()
        try raw.execute("PRAGMA synchronous = OFF")  // this connection only: thousands of small writes

        func lookup(_ itemKey: ItemKey) -> [UInt8] { store.connection.envelope.itemLookup(itemKey) }
        func itemReader(_ itemKey: ItemKey) -> (TokenStore) -> String {
            { s in outcomeCode { if try s.item(for: itemKey) == nil { throw Absent() } } }
        }
        let entryID = try #require(try raw.firstRow("SELECT entry_id FROM pending_revocations", []) { $0.blob(0) })
        let userRef = store.connection.envelope.userRef("alice-user")
        var targets: [Target] = []
        for (name, itemKey) in [("rt", key("alice")), ("apple-id", key("alice", .appleUserID)),
                                ("generic", key("alice", .generic))] {
            targets.append(Target(
                name: "items/\(name)", table: "items", rowKeyColumn: "lookup", keyIDColumn: "key_id", blobColumn: "sealed",
                rowKey: lookup(itemKey), read: itemReader(itemKey), rowKeyReadsAbsent: true))
        }
        // The access token lives in its own table since schema version 6.
        targets.append(Target(
            name: "access_tokens", table: "access_tokens", rowKeyColumn: "lookup", keyIDColumn: "key_id", blobColumn: "sealed",
            rowKey: store.connection.envelope.accessTokenLookup(AccessTokenKey(account: "alice", audience: nil, scopes: ["openid", "read"])),
            read: { s in verifyOutcome(s) }, rowKeyReadsAbsent: false))
        targets.append(Target(
            name: "pending_revocations", table: "pending_revocations", rowKeyColumn: "entry_id", keyIDColumn: "key_id",
            blobColumn: "sealed", rowKey: entryID,
            read: { s in outcomeCode { _ = try s.pendingRevocations() } }, rowKeyReadsAbsent: false))
        targets.append(Target(
            name: "credential_states", table: "credential_states", rowKeyColumn: "user_ref", keyIDColumn: "key_id",
            blobColumn: "sealed_user", rowKey: userRef,
            read: { s in
                outcomeCode {
                    let report = try s.verify()
                    guard let bad = report.badRows.first else { return }
                    throw TokenStoreError(TokenStoreError.Code(known: String(bad.reason.prefix { $0 != ":" })) ?? .ioError, "verify")
                }
            }, rowKeyReadsAbsent: false))

        // Everything reads before tampering.
        for target in targets where target.read(store) != "ok" {
            Issue.record("\(target.name) does not read before tampering: \(target.read(store))")
        }

        let stride = max(1, Int(ProcessInfo.processInfo.environment["TAMPER_BITS_STRIDE"] ?? "") ?? 1)
        var tried = 0, forgeries = 0, wrongCode = 0
        var perRegion: [String: Int] = [:]
        func check(_ target: Target, _ what: String, mutateRowKey: Bool = false) {
            tried += 1
            perRegion[what, default: 0] += 1
            let result = target.read(store)
            if mutateRowKey && target.rowKeyReadsAbsent {
                // Not found under its own key is fine; where it now is, it must not open.
                if result == "ok" { forgeries += 1; Issue.record("\(target.name) \(what): read back") }
                let listing = outcomeCode { _ = try store.items() }
                if listing != TokenStoreError.Code.integrityCheckFailed.rawValue {
                    wrongCode += 1
                    Issue.record("\(target.name) \(what): listing gave \(listing)")
                }
                return
            }
            if result == "ok" {
                forgeries += 1
                Issue.record("\(target.name) \(what): a tampered record was accepted")
            } else if result != TokenStoreError.Code.integrityCheckFailed.rawValue {
                wrongCode += 1
                Issue.record("\(target.name) \(what): \(result), expected integrityCheckFailed")
            }
        }

        for target in targets {
            let whereRow = "WHERE \(target.rowKeyColumn) = ?"
            let original = try #require(try raw.firstRow(
                "SELECT \(target.keyIDColumn), \(target.blobColumn) FROM \(target.table) \(whereRow)", [.blob(target.rowKey)]
            ) { ($0.blob(0), $0.blob(1)) })
            let (keyID, blob) = original
            func setBlob(_ value: [UInt8]) throws {
                try raw.run("UPDATE \(target.table) SET \(target.blobColumn) = ? \(whereRow)", [.blob(value), .blob(target.rowKey)])
            }
            func setKeyID(_ value: [UInt8]) throws {
                try raw.run("UPDATE \(target.table) SET \(target.keyIDColumn) = ? \(whereRow)", [.blob(value), .blob(target.rowKey)])
            }
            let tagStart = blob.count - Sealer.tagBytes
            for bit in Swift.stride(from: 0, to: blob.count * 8, by: stride) {
                var changed = blob
                changed[bit / 8] ^= UInt8(1 << (bit % 8))
                try setBlob(changed)
                let byte = bit / 8
                check(target, byte == 0 ? "version" : byte <= Sealer.nonceBytes ? "nonce" : byte >= tagStart ? "tag" : "ciphertext")
            }
            for length in Swift.stride(from: 0, to: blob.count, by: stride) {
                try setBlob(Array(blob[0..<length]))
                check(target, "truncate")
            }
            for extra in [[UInt8(0)], [UInt8](repeating: 0xa5, count: 16), (0..<1000).map { UInt8(truncatingIfNeeded: $0) }] {
                try setBlob(blob + extra)
                check(target, "extend")
            }
            try setBlob(blob)
            for bit in Swift.stride(from: 0, to: keyID.count * 8, by: stride) {
                var changed = keyID
                changed[bit / 8] ^= UInt8(1 << (bit % 8))
                try setKeyID(changed)
                check(target, "key_id")
            }
            try setKeyID(keyID)
            for bit in Swift.stride(from: 0, to: target.rowKey.count * 8, by: stride) {
                var changed = target.rowKey
                changed[bit / 8] ^= UInt8(1 << (bit % 8))
                try raw.run(
                    "UPDATE \(target.table) SET \(target.rowKeyColumn) = ? \(whereRow)", [.blob(changed), .blob(target.rowKey)])
                check(target, "row_key", mutateRowKey: true)
                try raw.run(
                    "UPDATE \(target.table) SET \(target.rowKeyColumn) = ? \(whereRow)", [.blob(target.rowKey), .blob(changed)])
            }
            #expect(target.read(store) == "ok", "\(target.name) reads again once restored")
        }

        // The key-check constant in data_keys: a flipped bit must never be accepted, and, the key
        // being intact (it still opens the rows), it reads as a damaged database, not as a
        // different key whose remedy would be a reset (review finding 5).
        let keyCheck = try #require(try raw.firstRow("SELECT key_check FROM data_keys WHERE status = 'active'", []) { $0.blob(0) })
        for bit in Swift.stride(from: 0, to: keyCheck.count * 8, by: stride) {
            var changed = keyCheck
            changed[bit / 8] ^= UInt8(1 << (bit % 8))
            try raw.run("UPDATE data_keys SET key_check = ? WHERE status = 'active'", [.blob(changed)])
            tried += 1
            perRegion["key_check", default: 0] += 1
            let result = outcomeCode {
                try KeyCheck.verify(database: raw, storeID: store.connection.envelope.storeID, key: store.connection.envelope.key)
            }
            if result == "ok" { forgeries += 1 } else if result != TokenStoreError.Code.databaseCorrupt.rawValue { wrongCode += 1 }
        }
        try raw.run("UPDATE data_keys SET key_check = ? WHERE status = 'active'", [.blob(keyCheck)])
        #expect(try t.reopen().verify().isHealthy)

        Reliability.metric("tamper_bits", [
            "records": targets.count + 1, "stride": stride, "changes_tried": tried, "bits_flipped": tried - perRegion["truncate", default: 0] - perRegion["extend", default: 0],
            "version": perRegion["version", default: 0], "nonce": perRegion["nonce", default: 0],
            "ciphertext": perRegion["ciphertext", default: 0], "tag": perRegion["tag", default: 0],
            "key_id": perRegion["key_id", default: 0], "row_key": perRegion["row_key", default: 0],
            "key_check": perRegion["key_check", default: 0], "truncations": perRegion["truncate", default: 0],
            "extensions": perRegion["extend", default: 0], "forgeries_accepted": forgeries, "wrong_error_code": wrongCode,
        ])
        #expect(forgeries == 0)
        #expect(wrongCode == 0)
        for region in ["version", "nonce", "ciphertext", "tag", "key_id", "row_key", "key_check", "truncate", "extend"] {
            #expect(perRegion[region, default: 0] > 0, "no change reached \(region) (stride \(stride))")
        }
    }
}

/// A read that found nothing (distinct from plaintext coming back).
struct Absent: Error {}
