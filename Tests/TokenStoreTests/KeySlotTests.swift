import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Key slots: several ways to one data key (a keyring item, a passphrase file, a recovery key
/// wrapped in the store), recorded under MACs and the store epoch; a lost keyring item no longer
/// loses the store when another slot exists. Real gnome-keyring (scripts/with-keyring).
@Suite("Key slots and the recovery key", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeySlotTests {
    private func passphrase(_ path: String, _ directory: TemporaryDirectory) -> PassphraseKeyProvider {
        PassphraseKeyProvider(
            storePath: path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: directory.appending("keys").path)
    }

    private func fill(_ store: TokenStore, rows: Int = 6) throws {
        for n in 0..<rows { try store.set(secret("secret-\(n)"), for: key("user\(n)", .generic)) }
    }

    private func expectAllRows(_ store: TokenStore, rows: Int = 6, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for n in 0..<rows {
            #expect(try store.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)"), sourceLocation: sourceLocation)
        }
        #expect(try store.verify().isHealthy, sourceLocation: sourceLocation)
    }

    /// Deletes the keyring item the store's first slot keeps (a keyring reset, another login).
    private func deleteFirstKeyringItem(_ store: TokenStore) throws {
        try SecretServiceKeyProvider().deleteKey(
            DataKeyReference(storeID: store.storeIdentifier, keyID: store.keyIdentifier, appID: testAppID))
    }

    @Test("an existing store has one slot, its provider's, without a write; a passphrase slot added opens it; the epoch rises")
    func firstSlotAndPassphraseSlot() throws {
        let t = try TestStore()
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        try fill(t.store)
        let written = { t.fileBytes().filter { !$0.key.hasSuffix("-shm") } }  // the -shm index changes on reads
        let before = written()
        let slots = try t.store.keySlots
        #expect(slots.map(\.id) == [1] && slots.map(\.kind) == [.secretService])
        #expect(written() == before, "listing the slots wrote to the store")
        let epoch = try t.store.epochStatus().file
        let added = try t.store.addKeySlot(passphrase(t.path, t.directory))
        #expect(added.id == 2 && added.kind == .passphrase)
        #expect(try t.store.keySlots.map(\.kind) == [.secretService, .passphrase])
        #expect(try t.store.epochStatus().file == epoch + 1)
        t.store.close()

        let byPassphrase = try TokenStore(path: t.path, appID: testAppID, keyProvider: passphrase(t.path, t.directory))
        try expectAllRows(byPassphrase)
        #expect(try byPassphrase.epochStatus() == StoreEpochStatus(file: epoch + 1, keyProvider: epoch + 1))
        byPassphrase.close()
        try expectAllRows(try t.reopen())
    }

    @Test("removing: the last slot is refused; the recorded provider follows the slot left; a rotation with slots keeps them")
    func removeSlots() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try fill(t.store)
        #expect(throws: TokenStoreError.invalidInput) { try t.store.removeKeySlot(1) }
        try t.store.addKeySlot(passphrase(t.path, t.directory))
        _ = try t.store.rotateDataKey()  // KeySlotRotationTests: every slot follows
        #expect(throws: TokenStoreError.invalidInput) { try t.store.removeKeySlot(7) }
        let epoch = try t.store.epochStatus().file
        try t.store.removeKeySlot(1)
        #expect(try t.store.epochStatus().file == epoch + 1)
        #expect(try t.store.keySlots.map(\.kind) == [.passphrase])
        #expect(throws: TokenStoreError.invalidInput) { try t.store.removeKeySlot(2) }
        t.store.close()
        #expect(try TokenStore.inspect(path: t.path).keyProvider == .passphrase)
        // The keyring item of slot 1 is gone with it.
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": t.store.keyIdentifier]) == 0)
        do {
            _ = try t.reopen()
            Issue.record("opened through a removed keyring slot")
        } catch let error as TokenStoreError {
            #expect(error.code == .wrongKeyProvider && error.recordedKeyProvider == .passphrase, "\(error)")
        }
        try expectAllRows(try TokenStore(path: t.path, appID: testAppID, keyProvider: passphrase(t.path, t.directory)))
    }

    @Test("recovery: the keyring item deleted → dataKeyMissing names the recovery slot; the recovery key opens with 0 rows lost; a keyring slot makes it usual again")
    func recoveryKey() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try fill(t.store)
        let (slot, recoveryKey) = try t.store.addRecoveryKeySlot(limits: .interactive)
        #expect(slot.kind == .recovery)
        let text = try #require(recoveryKey.text.stringValue())
        #expect(text.split(separator: "-").count == 9 && text.split(separator: "-").allSatisfy { $0.count == 8 })
        #expect(!t.fileBytes().values.contains { $0.contains(text) }, "the recovery key's text is in the store's files")
        try deleteFirstKeyringItem(t.store)
        t.store.close()

        do {
            _ = try t.reopen()
            Issue.record("opened with its keyring item deleted")
        } catch let error as TokenStoreError {
            #expect(error.code == .dataKeyMissing, "\(error)")
            #expect(error.hint?.contains("recovery") == true && error.hint?.contains("--recovery-key-fd") == true, "\(error.hint ?? "")")
            #expect(error.hint?.contains("do not reset") == true)
        }
        // Typed back with other case and spaces: the same key; one letter changed: mistyped.
        let typed = try RecoveryKey(text: SecretBytes(utf8: text.uppercased().replacingOccurrences(of: "-", with: " ")))
        var wrongLetter = Array(text.utf8)
        wrongLetter[0] = wrongLetter[0] == UInt8(ascii: "c") ? UInt8(ascii: "b") : UInt8(ascii: "c")
        #expect(throws: TokenStoreError.invalidInput) { try RecoveryKey(text: SecretBytes(wrongLetter)) }
        #expect(throws: TokenStoreError.wrongPassphrase) {
            try TokenStore(path: t.path, appID: testAppID, keyProvider: RecoveryKeyProvider(recoveryKey: .generate()))
        }
        let recovered = try TokenStore(path: t.path, appID: testAppID, keyProvider: RecoveryKeyProvider(recoveryKey: typed))
        try expectAllRows(recovered)
        // Locked and unlocked: the key unwrapped again from the recovery slot.
        try recovered.lock()
        try recovered.unlock()
        try expectAllRows(recovered)
        try recovered.addKeySlot(SecretServiceKeyProvider())
        recovered.close()
        try expectAllRows(try t.reopen())
    }

    @Test("destroy deletes the keyring item a second slot filed under its own id")
    func destroyDeletesSlotKeys() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try fill(t.store)
        let second = try t.store.addKeySlot(SecretServiceKeyProvider())
        #expect(second.id == 2)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) >= 2)
        try t.store.destroyStore(confirm: .yesDestroyEverything)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 0, "a slot's keyring item outlived destroy")
    }

    @Test("tamper: a slot row edited, two rows' kinds swapped, a row deleted or added → integrityCheckFailed, no open")
    func tamper() throws {
        let t = try TestStore()
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        try fill(t.store)
        try t.store.addKeySlot(passphrase(t.path, t.directory))
        t.store.close()
        let edits = [
            "UPDATE key_slots SET created_at = created_at + 1 WHERE id = 2",
            "UPDATE key_slots SET kind = CASE id WHEN 1 THEN 'passphrase' ELSE 'secret-service' END",
            "UPDATE key_slots SET key_ref = (SELECT key_ref FROM key_slots WHERE id = 2) WHERE id = 1",
            "DELETE FROM key_slots WHERE id = 2",
            "INSERT INTO key_slots SELECT 3, kind, key_ref, sealed, created_at, mac FROM key_slots WHERE id = 2",
            "DELETE FROM key_slot_set",
        ]
        for edit in edits {
            let copy = t.directory.appending("copy-\(edits.firstIndex(of: edit)!)/tokens.sqlite").path
            try FileManager.default.createDirectory(atPath: PathNames.directory(of: copy), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: t.path, toPath: copy)
            try chmod(PathNames.directory(of: copy), 0o700)
            do {
                let db = try Database(path: copy)
                try db.execute(edit)
            }
            do {
                _ = try TokenStore(path: copy, appID: testAppID)
                Issue.record("opened after: \(edit)")
            } catch let error as TokenStoreError {
                #expect(error.code == .integrityCheckFailed, "\(edit): \(error)")
            }
        }
        try expectAllRows(try t.reopen())
    }

    private func chmod(_ path: String, _ mode: mode_t) throws {
        guard Foundation.chmod(path, mode) == 0 else { throw TokenStoreError(.ioError, "chmod") }
    }
}
