import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

// The Secret portal key provider. The file format and the automatic choice run anywhere; the
// tests that talk to the portal run only in scripts/providers/portal's environment (a private
// bus with xdg-desktop-portal and gnome-keyring's portal backend; TOKENSTORE_TEST_PORTAL=1),
// on the host, so they get the secret all host apps share. The per-app secrets (two app ids,
// two keys), the refusing and the silent portal are proven by scripts/providers/portal-tests
// with tokenctl under bubblewrap.

private let portalRunning = ProcessInfo.processInfo.environment["TOKENSTORE_TEST_PORTAL"] == "1"

private func reference(_ keyID: String = String(repeating: "b", count: 32)) -> DataKeyReference {
    DataKeyReference(storeID: String(repeating: "a", count: 32), keyID: keyID, appID: "org.example.TokenStoreTest")
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
}

@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct PortalKeyProviderTests {
    @Test("the file format: 118 bytes, round trip, no plaintext key, bound to its reference")
    func fileFormat() throws {
        let master = SecretBytes.random(count: 32), key = SecretBytes.random(count: 32)
        let bytes = try PortalKeyFile.wrap(key, master: master, reference: reference())
        #expect(bytes.count == PortalKeyFile.totalCount && bytes.count == 118)
        #expect(!contains(bytes, key.copyBytes()))
        #expect(!contains(bytes, Array("org.example".utf8)))
        #expect(try PortalKeyFile.unwrap(bytes, master: master, reference: reference()) == key)
        // Copied under another key id: the associated data no longer matches.
        #expect(throws: TokenStoreError.wrongPassphrase) {
            try PortalKeyFile.unwrap(bytes, master: master, reference: reference(String(repeating: "c", count: 32)))
        }
        // Two wraps of one key differ (random subkey id and nonce).
        #expect(try PortalKeyFile.wrap(key, master: master, reference: reference()) != bytes)
    }

    @Test("another app's master key is wrongPassphrase; a damaged or foreign file is integrityCheckFailed")
    func wrongMasterAndDamage() throws {
        let master = SecretBytes.random(count: 32), key = SecretBytes.random(count: 32)
        let bytes = try PortalKeyFile.wrap(key, master: master, reference: reference())
        #expect(throws: TokenStoreError.wrongPassphrase) {
            try PortalKeyFile.unwrap(bytes, master: SecretBytes.random(count: 32), reference: reference())
        }
        for index in [0, 5, 10, 40, 100, 117] {
            var damaged = bytes
            damaged[index] ^= 0x01
            #expect(throws: TokenStoreError.integrityCheckFailed) {
                try PortalKeyFile.unwrap(damaged, master: master, reference: reference())
            }
        }
        #expect(throws: TokenStoreError.integrityCheckFailed) {
            try PortalKeyFile.unwrap(Array(bytes.dropLast()), master: master, reference: reference())
        }
    }

    @Test("the automatic choice: the Secret Service outside a sandbox; the sandbox is told by its marker file")
    func automaticChoice() throws {
        let directory = try TemporaryDirectory()
        let marker = directory.appending("flatpak-info").path
        #expect(!KeyProviderSelection.isSandboxed(marker: marker))
        #expect(FileManager.default.createFile(atPath: marker, contents: Data("[Application]\nname=org.example.A\n".utf8)))
        #expect(KeyProviderSelection.isSandboxed(marker: marker))
        try #require(!KeyProviderSelection.isSandboxed(), "the tests must not run in a sandbox")
        #expect(KeyProviderSelection.automatic(storePath: directory.appending("s.sqlite").path).name == "secret-service")
        #expect(PortalKeyProvider(storePath: "/a/b/s.sqlite").directory == "/a/b")
        #expect(PortalKeyProvider(storePath: "s.sqlite").directory == ".")
        #expect(PortalKeyProvider(storePath: "/s.sqlite").directory == "/")
        #expect(PortalKeyProvider(storePath: "/a/s.sqlite").name == "portal")
    }

    @Test("through the real portal: a 0600 file with no plaintext key; a second provider (a second run) reads it",
          .enabled(if: portalRunning, "needs scripts/providers/portal"))
    func realPortalRoundTrip() throws {
        let directory = try TemporaryDirectory()
        let key = SecretBytes.random(count: 32)
        let first = PortalKeyProvider(directory: directory.path)
        try first.storeKey(key, for: reference())
        let path = try first.filePath(for: reference())
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count == 118 && !contains(bytes, key.copyBytes()))
        #expect(try first.availability(of: reference()) == .present)

        let second = PortalKeyProvider(directory: directory.path)
        #expect(try second.loadKey(reference()) == key)
        #expect(try second.loadKey(reference(String(repeating: "d", count: 32))) == nil)
        try second.deleteKey(reference())
        #expect(try first.availability(of: reference()) == .missing)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("through the real portal: a store opens, rotates (new key file, then the old one deleted), and reopens",
          .enabled(if: portalRunning, "needs scripts/providers/portal"))
    func realPortalStoreAndRotation() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("tokens.sqlite").path
        let keyFiles = { try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".portal-key") } }
        let account = ItemKey(account: "portal-user", kind: .generic)
        do {
            let store = try TokenStore(path: path, appID: "org.example.TokenStoreTest", keyProvider: PortalKeyProvider(storePath: path))
            #expect(store.keyProvider.name == "portal")
            try store.set(SecretBytes(utf8: "value-1"), for: account)
            let before = try keyFiles()
            #expect(before.count == 1)
            _ = try store.rotateDataKey()
            let after = try keyFiles()
            #expect(after.count == 1 && after != before)
            store.close()
        }
        let reopened = try TokenStore(path: path, appID: "org.example.TokenStoreTest", keyProvider: PortalKeyProvider(storePath: path))
        #expect(try reopened.item(for: account)?.secret.stringValue() == "value-1")
    }
}
