import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// A data-key rotation (crypto-erase after the last logout, `tokenctl rotate-key`) with key
/// slots: every slot follows (its box re-sealed to the new key), the slots whose provider needs
/// nobody get new key pairs and their old ones are deleted, a slot that keeps the data key itself
/// (schema version 16) refuses the rotation, and a crash at every step leaves a store that opens
/// through every slot. Real gnome-keyring (scripts/with-keyring).
@Suite("Key slots through a key rotation", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeySlotRotationTests {
    private static let rows = 6

    private struct Slotted {
        let t: TestStore
        let storeID: String
        let passphraseDirectory: String
        let recoveryKey: RecoveryKey

        func passphrase() -> PassphraseKeyProvider {
            PassphraseKeyProvider(storePath: t.path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: passphraseDirectory)
        }

        func recovery() -> RecoveryKeyProvider { RecoveryKeyProvider(recoveryKey: recoveryKey, limits: .interactive) }
    }

    /// A keyring store with rows and four slots: 1 its keyring item (the data key itself),
    /// 2 a second keyring slot, 3 a passphrase, 4 a recovery key (2–4 boxed).
    private func slotted() throws -> Slotted {
        let t = try TestStore()
        for n in 0..<Self.rows { try t.store.set(secret("secret-\(n)"), for: key("user\(n)", .generic)) }
        let directory = t.directory.appending("keys").path
        try t.store.addKeySlot(SecretServiceKeyProvider())
        try t.store.addKeySlot(
            PassphraseKeyProvider(storePath: t.path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: directory))
        let (_, recoveryKey) = try t.store.addRecoveryKeySlot(limits: .interactive)
        return Slotted(t: t, storeID: t.store.storeIdentifier, passphraseDirectory: directory, recoveryKey: recoveryKey)
    }

    private func expectAllRows(_ store: TokenStore, _ how: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for n in 0..<Self.rows {
            #expect(try store.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)"), "\(how): row \(n)", sourceLocation: sourceLocation)
        }
        #expect(try store.verify().isHealthy, "\(how)", sourceLocation: sourceLocation)
    }

    /// The slot rows' key ids and public keys, by slot id, as the file has them.
    private func slotColumns(_ path: String) throws -> [Int64: (keyRef: String, publicKey: String?)] {
        var out: [Int64: (String, String?)] = [:]
        try Database(path: path).forEachRow(
            "SELECT s.id, s.key_ref, b.public_key FROM key_slots s LEFT JOIN key_slot_boxes b ON b.slot_id = s.id"
        ) { row in
            out[row.int(0)] = (Hex.encode(row.blob(1)), row.isNull(2) ? nil : Hex.encode(row.blob(2)))
        }
        return out
    }

    private func keyringItems(_ storeID: String, keyID: String? = nil) throws -> Int {
        var attributes = ["store-id": storeID]
        if let keyID { attributes["key-id"] = keyID }
        return try PrivateKeyring.itemCount(attributes: attributes)
    }

    @Test("a rotation re-seals every slot: each opens with every row; the keyring slot's key pair is new and its old one gone; the recovery and passphrase slots keep theirs")
    func rotationReachesEverySlot() throws {
        let s = try slotted()
        defer { try? PrivateKeyring.clearItems(storeID: s.storeID) }
        let before = try slotColumns(s.t.path)
        #expect(before[1]?.publicKey == nil && [2, 3, 4].allSatisfy { before[$0]?.publicKey != nil }, "\(before)")
        let oldKey = s.t.store.keyIdentifier
        let report = try s.t.store.rotateDataKey()
        #expect(report.previousKeyIdentifier == oldKey && report.rowsResealed >= Self.rows)
        let after = try slotColumns(s.t.path)
        #expect(after[1]?.keyRef == report.newKeyIdentifier, "the first slot follows the new key's id")
        #expect(after[2]?.keyRef != before[2]?.keyRef && after[2]?.publicKey != before[2]?.publicKey, "the keyring slot got no new key pair")
        #expect(after[3]?.publicKey == before[3]?.publicKey && after[4]?.publicKey == before[4]?.publicKey)
        // The old data key's item and the keyring slot's old key pair are gone; two items are left.
        #expect(try keyringItems(s.storeID, keyID: oldKey) == 0)
        #expect(try keyringItems(s.storeID, keyID: before[2]!.keyRef) == 0)
        #expect(try keyringItems(s.storeID, keyID: after[2]!.keyRef) == 1)
        #expect(try keyringItems(s.storeID) == 2)
        try expectAllRows(s.t.store, "the rotating object")
        s.t.store.close()

        try expectAllRows(try s.t.reopen(), "keyring")
        try expectAllRows(try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.passphrase()), "passphrase")
        try expectAllRows(try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.recovery()), "recovery key")
        // The first keyring item deleted: slot 2 (the second keyring item) still opens it.
        try SecretServiceKeyProvider().deleteKey(DataKeyReference(storeID: s.storeID, keyID: report.newKeyIdentifier, appID: testAppID))
        try expectAllRows(try s.t.reopen(), "the second keyring slot")
    }

    @Test("a rotation of a store opened with its passphrase slot: the passphrase slot gets a new key pair, the keyring's first slot refuses (open with the keyring)")
    func rotationThroughAnotherSlot() throws {
        let s = try slotted()
        defer { try? PrivateKeyring.clearItems(storeID: s.storeID) }
        s.t.store.close()
        let byPassphrase = try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.passphrase())
        let oldKey = byPassphrase.keyIdentifier
        do {
            _ = try byPassphrase.rotateDataKey()
            Issue.record("rotated with the first slot (the data key itself, in the keyring) left behind")
        } catch let error as TokenStoreError {
            #expect(error.code == .invalidInput && error.hint?.contains("--key-provider") == true || error.hint?.contains("keyring") == true, "\(error)")
        }
        #expect(byPassphrase.keyIdentifier == oldKey)
        #expect(try byPassphrase.dataKeys().map(\.status) == [.active], "the refused rotation left a key record")
        // Without the first slot, the same rotation goes through and the passphrase slot gets a new pair.
        try byPassphrase.removeKeySlot(1)
        let before = try slotColumns(s.t.path)
        _ = try byPassphrase.rotateDataKey()
        let after = try slotColumns(s.t.path)
        #expect(after[3]?.publicKey != before[3]?.publicKey && after[4]?.publicKey == before[4]?.publicKey)
        try expectAllRows(byPassphrase, "the rotating object")
        byPassphrase.close()
        try expectAllRows(try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.passphrase()), "passphrase")
        try expectAllRows(try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.recovery()), "recovery key")
        try expectAllRows(try TokenStore(path: s.t.path, appID: testAppID, keyProvider: SecretServiceKeyProvider()), "keyring slot 2")
    }

    @Test("a slot that keeps the data key itself (added at schema version 16) refuses the rotation; nothing changes")
    func legacySlotRefuses() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("s"), for: key("alice", .generic))
        let directory = t.directory.appending("keys").path
        let provider = PassphraseKeyProvider(storePath: t.path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: directory)
        // What addKeySlot did at version 16: the provider keeps the data key, the row has no box.
        try t.store.connection.write { db, envelope in
            _ = try KeySlots.materialize(db, envelope: envelope, recordedKind: .secretService)
            let keyRef = SecretBytes.random(count: 16).copyBytes()
            try provider.storeKey(envelope.key.material, for: DataKeyReference(storeID: storeID, keyID: Hex.encode(keyRef), appID: testAppID))
            _ = try KeySlots.insert(db, kind: .passphrase, keyRef: keyRef, sealed: nil, createdAt: 1, envelope: envelope)
        }
        let oldKey = t.store.keyIdentifier
        let bytes = t.fileBytes()[t.path]
        do {
            _ = try t.store.rotateDataKey()
            Issue.record("rotated with a version-16 slot left behind")
        } catch let error as TokenStoreError {
            #expect(error.code == .invalidInput && error.hint?.contains("slot remove 2") == true, "\(error)")
        }
        #expect(t.store.keyIdentifier == oldKey && t.fileBytes()[t.path] == bytes)
        t.store.close()
        try expectAllRowsOpen(TokenStore(path: t.path, appID: testAppID, keyProvider: provider))
    }

    private func expectAllRowsOpen(_ store: TokenStore) throws {
        #expect(try store.secret(for: key("alice", .generic)) == secret("s"))
    }

    @Test("a slot's box edited, or a box with no slot row: integrityCheckFailed (65), for the slot's own open and the keyring's")
    func boxTamper() throws {
        let s = try slotted()
        defer { try? PrivateKeyring.clearItems(storeID: s.storeID) }
        s.t.store.close()
        let raw = try s.t.rawDatabase()
        let boxed = try #require(try raw.firstRow("SELECT boxed_key FROM key_slot_boxes WHERE slot_id = 3", [], { $0.blob(0) }))
        var edited = boxed
        edited[edited.count - 1] ^= 0x01
        try raw.run("UPDATE key_slot_boxes SET boxed_key = ? WHERE slot_id = 3", [.blob(edited)])
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try TokenStore(path: s.t.path, appID: testAppID, keyProvider: s.passphrase()) }
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try s.t.reopen() }
        try raw.run("UPDATE key_slot_boxes SET boxed_key = ? WHERE slot_id = 3", [.blob(boxed)])
        try expectAllRows(try s.t.reopen(), "restored")
        try raw.run("INSERT INTO key_slot_boxes(slot_id, public_key, boxed_key) VALUES (9, ?, ?)", [.blob(boxed), .blob(boxed)])
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try s.t.reopen() }
    }

    @Test("a crash at every step of a rotation with slots: the next open finishes it, and every slot opens with every row")
    func crashAtEveryStep() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let points = [
            "rotate.afterSlotKey", "rotate.afterNewKey", "rotate.afterBatch", "rotate.afterSwitch", "rotate.afterOldKeyDeleted",
            "rotate.afterSlotKeyDeleted",
        ]
        let s = try slotted()
        defer { try? PrivateKeyring.clearItems(storeID: s.storeID) }
        s.t.store.close()
        var violations: [String] = []
        for point in points {
            let oldKey = try s.t.reopen().keyIdentifier
            let result = try runChild(child, ["km-rotate", s.t.path, "2"], environment: ["TOKENSTORE_CRASH_POINT": point])
            if !result.diedAtCrashPoint(point) { violations.append("\(point): the child did not die: \(result.status) \(result.stderr)") }
            let store = try s.t.reopen()
            if store.keyIdentifier == oldKey { violations.append("\(point): the rotation was not finished") }
            if try store.dataKeys().map(\.status) != [.active] { violations.append("\(point): keys \(try store.dataKeys().map(\.status))") }
            store.close()
            for (how, provider) in [("keyring", SecretServiceKeyProvider() as any KeyProvider), ("passphrase", s.passphrase()), ("recovery", s.recovery())] {
                do {
                    let opened = try TokenStore(path: s.t.path, appID: testAppID, keyProvider: provider)
                    for n in 0..<Self.rows where try opened.secret(for: key("user\(n)", .generic)) != secret("secret-\(n)") {
                        violations.append("\(point): \(how): row \(n)")
                    }
                    opened.close()
                } catch {
                    violations.append("\(point): \(how) does not open: \(error)")
                }
            }
            // No key left behind: the data key's item and slot 2's.
            if try keyringItems(s.storeID) != 2 { violations.append("\(point): \(try keyringItems(s.storeID)) keyring items") }
        }
        #expect(violations.isEmpty, "\(violations)")
        print("METRIC crash_points area=rotation_with_slots points=\(points.count) violations=\(violations.count)")
    }

    @Test("a rotation's slot records are trusted only under their MACs: an edited new public key is not sealed to, an edited retired key id deletes nothing")
    func rotationRecordsTamper() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let s = try slotted()
        defer { try? PrivateKeyring.clearItems(storeID: s.storeID) }
        s.t.store.close()
        // Killed after slot 2's new key pair was recorded and filed: point its record at a key pair of our own.
        let died = try runChild(child, ["km-rotate", s.t.path, "2"], environment: ["TOKENSTORE_CRASH_POINT": "rotate.afterSlotKey"])
        #expect(died.diedAtCrashPoint("rotate.afterSlotKey"), "\(died.stderr)")
        let attacker = SlotBox.keyPair()
        try s.t.rawDatabase().run("UPDATE rotation_slot_keys SET public_key = ? WHERE slot_id = 2", [.blob(attacker.publicKey)])
        let finished = try s.t.reopen()  // finishes the rotation
        let boxed = try #require(try s.t.rawDatabase().firstRow(
            "SELECT public_key, boxed_key FROM key_slot_boxes WHERE slot_id = 2", [], { ($0.blob(0), $0.blob(1)) }))
        #expect(boxed.0 != attacker.publicKey, "the data key was sealed to a public key from an unauthenticated row")
        #expect((try? SlotBox.open(boxed.1, publicKey: attacker.publicKey, secretKey: attacker.secretKey)) == nil)
        try expectAllRows(finished, "after the edited record")
        finished.close()

        // Killed after the switch, before the retired slot key was deleted: point the retired
        // record at slot 2's live key.
        let again = try runChild(child, ["km-rotate", s.t.path, "2"], environment: ["TOKENSTORE_CRASH_POINT": "rotate.afterSwitch"])
        #expect(again.diedAtCrashPoint("rotate.afterSwitch"), "\(again.stderr)")
        let retired = try s.t.rawDatabase().firstRow("SELECT count(*) FROM retired_slot_keys", [], { $0.int(0) })
        #expect(retired == 1, "the switch recorded no retired slot key")
        let current = try #require(try slotColumns(s.t.path)[2]).keyRef
        try s.t.rawDatabase().run("UPDATE retired_slot_keys SET key_ref = ?", [.blob(Hex.decode(current)!)])
        try s.t.reopen().close()  // deletes retired keys: the edited record names nothing to delete
        #expect(try keyringItems(s.storeID, keyID: current) == 1, "a live slot key was deleted on an unauthenticated record's word")
        try SecretServiceKeyProvider().deleteKey(
            DataKeyReference(storeID: s.storeID, keyID: try s.t.reopen().keyIdentifier, appID: testAppID))
        try expectAllRows(try s.t.reopen(), "slot 2 alone")
    }
}
