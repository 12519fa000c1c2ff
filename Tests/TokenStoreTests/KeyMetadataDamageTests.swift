import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

// Review finding 5: damaged key metadata in the database must not read as a lost key, and the
// reset advised for a lost key must never delete a key item that still opens the store.

private func keyItems(_ storeID: String, keyID: String? = nil) throws -> Int {
    var attributes = ["store-id": storeID]
    if let keyID { attributes["key-id"] = keyID }
    return try PrivateKeyring.itemCount(attributes: attributes)
}

private func openError(_ body: () throws -> Void) -> TokenStoreError? {
    do {
        try body()
        return nil
    } catch let error as TokenStoreError {
        return error
    } catch {
        Issue.record("untyped error: \(error)")
        return nil
    }
}

@Suite("Key metadata damage", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyMetadataDamageTests {
    /// Reproduces finding 5: `UPDATE data_keys SET status='retired'` made the open fail with
    /// `dataKeyMissing` and the hint to reset, although the key was intact in the keyring.
    /// Now it is `databaseCorrupt`, advising to restore the file and not to reset.
    @Test("a retired status on the active key is databaseCorrupt with a restore-the-file hint, never dataKeyMissing")
    func retiredStatusIsNotKeyLoss() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("value"), for: key("alice"))
        t.store.close()
        let raw = try t.rawDatabase()
        try raw.run("UPDATE data_keys SET status = 'retired'")
        let error = try #require(openError { _ = try t.reopen() })
        #expect(error.code == .databaseCorrupt)
        #expect(error.hint?.contains("Restore the database file") == true)
        #expect(error.hint?.contains("Do not reset") == true)
        #expect(try keyItems(storeID) == 1, "nothing was deleted")
        try raw.run("UPDATE data_keys SET status = 'active'")
        #expect(try t.reopen().secret(for: key("alice"))?.stringValue() == "value")
    }

    /// Finding 5, second half: a damaged key-check blob (or a changed key scheme) was
    /// `dataKeyCorrupt`, "the keyring holds a different key". The key still opens the rows, so
    /// it is the database's damage.
    @Test("a damaged key check or key scheme is databaseCorrupt; a really different key stays dataKeyCorrupt")
    func damagedKeyCheck() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("value"), for: key("alice"))
        let keyID = t.store.keyIdentifier
        t.store.close()
        let raw = try t.rawDatabase()
        let check = try #require(try raw.firstRow("SELECT key_check FROM data_keys", []) { $0.blob(0) })
        var flipped = check
        flipped[30] ^= 0x01
        try raw.run("UPDATE data_keys SET key_check = ?", [.blob(flipped)])
        #expect(openError { _ = try t.reopen() }?.code == .databaseCorrupt)
        try raw.run("UPDATE data_keys SET key_check = ?", [.blob(check)])
        try raw.run("UPDATE data_keys SET scheme = 1")
        #expect(openError { _ = try t.reopen() }?.code == .databaseCorrupt)
        try raw.run("UPDATE data_keys SET scheme = 2")
        #expect(try t.reopen().secret(for: key("alice"))?.stringValue() == "value")

        // Another key under the same reference: nothing opens, so it is a different key.
        t.store.close()
        try SecretServiceKeyProvider().storeKey(
            .random(count: 32), for: DataKeyReference(storeID: storeID, keyID: keyID, appID: testAppID))
        #expect(openError { _ = try t.reopen() }?.code == .dataKeyCorrupt)
    }

    /// Finding 5: `reset` deleted every key item `data_keys` listed, the intact one included, so
    /// a backup of the file could never be opened again. Now a key that still opens the store
    /// is kept, and the backup opens with it.
    @Test("reset never deletes a key item that still opens the store; a backup of the file opens with it")
    func resetKeepsAnIntactKey() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("value"), for: key("alice"))
        let keyID = t.store.keyIdentifier
        t.store.close()
        let backup = t.directory.appending("backup/tokens.sqlite").path
        try FileManager.default.createDirectory(atPath: (backup as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: t.path, toPath: backup)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: t.path + suffix) {
            try FileManager.default.copyItem(atPath: t.path + suffix, toPath: backup + suffix)
        }

        try t.rawDatabase().run("UPDATE data_keys SET status = 'retired'")
        let report = try TokenStore.resetStore(path: t.path, appID: testAppID, confirm: .yesDiscardSealedData)
        #expect(report.keptKeyIdentifiers == [keyID])
        #expect(report.discardedKeyIdentifiers == [keyID])
        #expect(try keyItems(storeID, keyID: keyID) == 1, "the intact key item is still there")
        let restored = try TokenStore(path: backup, appID: testAppID)
        #expect(try restored.secret(for: key("alice"))?.stringValue() == "value")
    }
}
