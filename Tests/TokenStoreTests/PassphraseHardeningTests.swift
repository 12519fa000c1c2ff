import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

// Review finding 15: the passphrase provider accepted any Argon2id limits libsodium allows
// (1 pass, 8 KiB), kept the wrapped key next to the database (one backup was enough to guess
// offline), and only unlinked a deleted key's file.

@Suite("PassphraseKeyProvider hardening", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PassphraseHardeningTests {
    /// Reproduces finding 15 (limits): 1 pass and 8 KiB were accepted. Now anything below
    /// libsodium's interactive limits is `invalidInput`, and nothing is written.
    @Test("Argon2id limits below libsodium's interactive ones are invalidInput; no key file is written")
    func weakLimitsRefused() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let keys = dir.appending("keys").path
        let interactive = PassphraseKeyProvider.Limits.interactive
        for weak in [PassphraseKeyProvider.Limits(opsLimit: 1, memLimit: 8_192),
                     .init(opsLimit: interactive.opsLimit - 1, memLimit: interactive.memLimit),
                     .init(opsLimit: interactive.opsLimit, memLimit: interactive.memLimit - 1)] {
            let provider = PassphraseKeyProvider(storePath: path, passphrase: secret("pw"), limits: weak, keyDirectory: keys)
            #expect(throws: TokenStoreError.invalidInput) { _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider) }
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: keys)) ?? []).isEmpty)
        let provider = PassphraseKeyProvider(storePath: path, passphrase: secret("pw"), limits: .interactive, keyDirectory: keys)
        #expect(throws: Never.self) { _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider) }
    }

    /// Reproduces finding 15 (location): `init(storePath:)` put the wrapped key in the
    /// database's directory. Now the default is `$XDG_STATE_HOME/tokenstore/keys`.
    @Test("the default key directory is under XDG_STATE_HOME (or ~/.local/state), never the database's directory")
    func defaultDirectoryIsElsewhere() {
        #expect(PassphraseKeyProvider.defaultDirectory(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]) == "/s/tokenstore/keys")
        #expect(PassphraseKeyProvider.defaultDirectory(environment: ["HOME": "/h"]) == "/h/.local/state/tokenstore/keys")
        #expect(PassphraseKeyProvider.defaultDirectory(environment: ["XDG_STATE_HOME": "relative", "HOME": "/h"]) == "/h/.local/state/tokenstore/keys")
        let provider = PassphraseKeyProvider(storePath: "/data/app/tokens.sqlite", passphrase: secret("pw"))
        #expect(provider.directory != "/data/app")
        #expect(provider.directory == PassphraseKeyProvider.defaultDirectory())
    }

    /// Key files an earlier version left beside the database still open the store; a rotation
    /// moves the key out (the new file in the key directory, the old one erased).
    @Test("a key file left beside the database by an earlier version still opens; rotation moves it out")
    func legacyLocationStillOpens() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let storeDir = dir.appending("store").path
        let keys = dir.appending("keys").path
        let old = try TokenStore(
            path: path, appID: testAppID,
            keyProvider: PassphraseKeyProvider(directory: storeDir, passphrase: secret("pw"), limits: .interactive))
        try old.set(secret("v"), for: key("alice"))
        old.close()
        let provider = PassphraseKeyProvider(storePath: path, passphrase: secret("pw"), limits: .interactive, keyDirectory: keys)
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider)
        #expect(try store.secret(for: key("alice"))?.stringValue() == "v")
        try store.rotateDataKey()
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeDir).filter { $0.hasSuffix(".key") }.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: keys).filter { $0.hasSuffix(".key") }.count == 1)
        #expect(try store.secret(for: key("alice"))?.stringValue() == "v")
    }

    /// Reproduces finding 15 (delete): `deleteKey` only unlinked the file, so its bytes stayed
    /// in the file's blocks. A second hard link made before the delete sees the same blocks:
    /// after the delete they hold only zeros.
    @Test("a deleted key's file is overwritten with zeros before it is unlinked")
    func deleteOverwrites() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let keys = dir.appending("keys").path
        let provider = PassphraseKeyProvider(storePath: path, passphrase: secret("pw"), limits: .interactive, keyDirectory: keys)
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider)
        try store.set(secret("v"), for: key("alice"))
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: keys).first { $0.hasSuffix(".key") })
        let witness = dir.appending("witness").path
        #expect(link(keys + "/" + name, witness) == 0)
        let before = try #require(FileManager.default.contents(atPath: witness))
        #expect(before.count == WrappedKeyFile.totalCount && before.contains(where: { $0 != 0 }))
        try store.rotateDataKey()  // deletes the old key
        #expect(!FileManager.default.fileExists(atPath: keys + "/" + name))
        let after = try #require(FileManager.default.contents(atPath: witness))
        #expect(after.count == before.count)
        #expect(after.allSatisfy { $0 == 0 }, "the old wrapped key is still readable in the file's blocks")
    }
}
