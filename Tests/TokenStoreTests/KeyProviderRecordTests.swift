import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Issue 24 item 9 (review N7, new-user trial): the store did not remember its key provider, so
/// a store opened with another one was "missing its key" (`dataKeyMissing`, advice: reset), and a
/// reset then destroyed every item. The file now records the provider kind under a MAC; another
/// provider is `wrongKeyProvider` naming the one it needs, reset refuses, and the automatic
/// choice follows the record.
@Suite("The store remembers its key provider", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyProviderRecordTests {
    private func passphrase(_ path: String, _ directory: TemporaryDirectory) -> PassphraseKeyProvider {
        PassphraseKeyProvider(
            storePath: path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: directory.appending("keys").path)
    }

    /// The database's and its WAL's bytes (an empty WAL and none are the same), to show nothing was written.
    private func bytes(_ path: String) -> [Data] {
        ["", "-wal"].map { FileManager.default.contents(atPath: path + $0) ?? Data() }
    }

    @Test("the trial's row: a passphrase store opened with the Secret Service running → wrongKeyProvider naming passphrase; reset refuses; nothing changed")
    func passphraseStoreWithoutPassphrase() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        do {
            let store = try TokenStore(path: path, appID: testAppID, keyProvider: passphrase(path, directory))
            for n in 0..<5 { try store.set(secret("secret-\(n)"), for: key("user\(n)", .generic)) }
            store.close()
        }
        #expect(try TokenStore.inspect(path: path).keyProvider == .passphrase)
        let before = bytes(path)
        for provider in [SecretServiceKeyProvider() as any KeyProvider, KeyProviderSelection.automatic(storePath: path)] {
            do {
                _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider)
                Issue.record("a passphrase store opened with \(provider.name)")
            } catch let error as TokenStoreError {
                #expect(error.code == .wrongKeyProvider, "\(error)")
                #expect(error.recordedKeyProvider == .passphrase)
                #expect(error.message.contains("'passphrase'") && error.message.contains("'secret-service'"), "\(error.message)")
                #expect(error.hint?.contains("passphrase-wrapped") == true && error.hint?.contains("--passphrase-fd") == true)
                #expect(error.hint?.contains("Do not reset") == true)
            }
        }
        #expect(throws: TokenStoreError.wrongKeyProvider) {
            try TokenStore.resetStore(path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), confirm: .yesDiscardSealedData)
        }
        #expect(throws: TokenStoreError.wrongKeyProvider) {
            try TokenStore.destroyStore(path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), confirm: .yesDestroyEverything)
        }
        #expect(bytes(path) == before, "a refused open, reset or destroy wrote to the store")

        let store = try TokenStore(path: path, appID: testAppID, keyProvider: passphrase(path, directory))
        for n in 0..<5 { #expect(try store.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)")) }
        #expect(try store.verify().isHealthy)
    }

    @Test("a Secret Service store opened with the portal provider names secret-service; the automatic choice follows the record")
    func secretServiceStoreWithPortal() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("kept"), for: key("bob", .generic))
        t.store.close()
        #expect(try TokenStore.inspect(path: t.path).keyProvider == .secretService)
        do {
            _ = try TokenStore(path: t.path, appID: testAppID, keyProvider: PortalKeyProvider(storePath: t.path))
            Issue.record("a Secret Service store opened with the portal provider")
        } catch let error as TokenStoreError {
            #expect(error.code == .wrongKeyProvider, "\(error)")
            #expect(error.recordedKeyProvider == .secretService)
            #expect(error.message.contains("'secret-service'") && error.hint?.contains("--key-provider secret-service") == true)
        }
        #expect(KeyProviderSelection.automatic(storePath: t.path).name == "secret-service")
        // Inside a sandbox a recorded Secret Service is kept without asking the bus (the probe
        // is bounded by 1 ms here, and its own answer does not matter).
        let sandboxed = { KeyProviderSelection.automatic(storePath: t.path, probeTimeout: .milliseconds(1), sandboxed: true).name }
        #expect(sandboxed() == "secret-service")
        // The choice reads the record (unchecked: the open checks it): a record naming the portal
        // selects it inside a sandbox; outside one the portal is never chosen, and the open names it.
        try t.rawDatabase().run("UPDATE store_info SET key_provider = 'portal'")
        #expect(sandboxed() == "portal")
        #expect(KeyProviderSelection.automatic(storePath: t.path).name == "secret-service")
        #expect(throws: TokenStoreError.wrongKeyProvider) { _ = try t.reopen() }
        try t.rawDatabase().run("UPDATE store_info SET key_provider = 'passphrase'")
        #expect(KeyProviderSelection.automatic(storePath: t.path).name == "secret-service")
        #expect(throws: TokenStoreError.wrongKeyProvider) { _ = try t.reopen() }
        // No store file, or not a store: the usual choice.
        #expect(KeyProviderSelection.automatic(storePath: t.directory.appending("none.sqlite").path).name == "secret-service")
    }

    @Test("the record is under the MAC: altered or removed while the key still opens → integrityCheckFailed; a rotation re-MACs it")
    func recordIsAuthenticated() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("kept"), for: key("carol", .generic))
        try t.store.rotateDataKey()
        t.store.close()
        #expect(try t.reopen().secret(for: key("carol", .generic)) == secret("kept"), "the rotation left the record valid")
        let raw = try t.rawDatabase()
        let mac = try #require(try raw.firstRow("SELECT key_provider_mac FROM store_info", []) { $0.blob(0) })
        try raw.run("UPDATE store_info SET key_provider_mac = ?", [.blob(mac.map { $0 ^ 1 })])
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try t.reopen() }
        try raw.run("UPDATE store_info SET key_provider = NULL, key_provider_mac = NULL")
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try t.reopen() }
        try raw.run("UPDATE store_info SET key_provider = 'secret-service', key_provider_mac = ?", [.blob(mac)])
        #expect(try t.reopen().secret(for: key("carol", .generic)) == secret("kept"))
    }

    @Test("a store from before version 10 records the provider that opens it at its first open")
    func olderStoreGetsItsRecord() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let old = try TokenStore(
            path: path, appID: testAppID, keyProvider: passphrase(path, directory), logger: .disabled,
            options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(9))))
        try old.set(secret("old"), for: key("dave", .generic))
        old.close()
        #expect(try TokenStore.inspect(path: path).keyProvider == nil)
        _ = try TokenStore(path: path, appID: testAppID, keyProvider: passphrase(path, directory))
        #expect(try TokenStore.inspect(path: path).keyProvider == .passphrase)
        #expect(throws: TokenStoreError.wrongKeyProvider) { _ = try TokenStore(path: path, appID: testAppID) }
    }
}
