import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// A file that is not a store is never changed, a read-only open changes nothing, and a failed
/// first open leaves nothing behind (issue 24, item 11).
@Suite("Foreign files, read-only opens, failed first opens", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ForeignFileTests {
    static func sideFiles(of path: String) -> [String] {
        ["-wal", "-shm", "-journal"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    /// Another program's database, in rollback-journal mode as most programs leave theirs: table `notes`, three rows.
    static func foreignDatabase(in directory: TemporaryDirectory) throws -> String {
        let path = directory.appending("app.db").path
        do {
            let db = try Database(path: path)
            _ = try db.scalarText("PRAGMA journal_mode = DELETE")
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('a'), ('b'), ('c');")
        }
        for suffix in ["-wal", "-shm"] { unlink(path + suffix) }
        #expect(chmod(path, 0o644) == 0)  // a mode a store would tighten: it must stay
        return path
    }

    @Test("another program's database is notAStore for the writing open, the read-only open, inspect, reset and destroy; not one byte changes")
    func foreignDatabaseIsRefusedUnchanged() throws {
        // Found in the trial: an open migrated 15 TokenStore tables into it before refusing it as schemaTampered.
        let directory = try TemporaryDirectory()
        let path = try Self.foreignDatabase(in: directory)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let provider = SecretServiceKeyProvider()
        let attempts: [(String, () throws -> Void)] = [
            ("open", { _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider) }),
            ("read-only open", { _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider, options: .init(readOnly: true)) }),
            ("inspect", { _ = try TokenStore.inspect(path: path) }),
            ("reset", { _ = try TokenStore.resetStore(path: path, appID: testAppID, keyProvider: provider, confirm: .yesDiscardSealedData) }),
            ("destroy", { try TokenStore.destroyStore(path: path, appID: testAppID, keyProvider: provider, confirm: .yesDestroyEverything) }),
        ]
        for (name, attempt) in attempts {
            do {
                try attempt()
                Issue.record("\(name) accepted another program's database")
            } catch let error as TokenStoreError {
                #expect(error.code == .notAStore, "\(name): \(error)")
                #expect(error.message.contains("not a TokenStore store"), "\(name)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(name) changed the file")
            #expect(Self.sideFiles(of: path).isEmpty, "\(name) added \(Self.sideFiles(of: path))")
            #expect(FileLayout.mode(of: path) == 0o644, "\(name) changed the mode")
        }
    }

    @Test("a new store and a migrated one carry application_id 'TkSt'; an empty SQLite database may still become a store")
    func applicationIDMarksStores() throws {
        let directory = try TemporaryDirectory()
        let fresh = directory.appending("fresh/tokens.sqlite").path
        try TokenStore(path: fresh, appID: testAppID, keyProvider: SecretServiceKeyProvider()).close()
        let read = try Database(path: fresh, readOnly: true)
        #expect(try read.scalarInt("PRAGMA application_id") == 0x546B_5374)

        // A store of version 2 has no id: it is known by its tables, and gets the id when migrated.
        let old = directory.appending("old/tokens.sqlite").path
        try TokenStore(
            path: old, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled, options: .init(),
            migrator: Migrator(migrations: Array(embeddedMigrations.prefix(2)))
        ).close()
        #expect(try Database(path: old, readOnly: true).scalarInt("PRAGMA application_id") == 0)
        try TokenStore(path: old, appID: testAppID, keyProvider: SecretServiceKeyProvider()).close()
        #expect(try Database(path: old, readOnly: true).scalarInt("PRAGMA application_id") == 0x546B_5374)

        // An SQLite file with nothing in it (and a zero-length file) may still be made a store.
        let blank = directory.appending("blank/tokens.sqlite").path
        try FileLayout.prepareDirectory(directory.appending("blank").path)
        do {
            let db = try Database(path: blank)
            _ = try db.scalarText("PRAGMA journal_mode")
        }
        try TokenStore(path: blank, appID: testAppID, keyProvider: SecretServiceKeyProvider()).close()
        #expect(try StoreIdentity.check(path: blank) == .store)
    }

    @Test("a read-only open reads a closed store without side files, without tightening its mode, and refuses writes")
    func readOnlyOpenChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        do {
            let store = try TokenStore(path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider())
            try store.set(SecretBytes(utf8: "kept"), for: ItemKey(account: "alice", kind: .generic))
            store.close()
        }
        #expect(Self.sideFiles(of: path).isEmpty, "the last close removes the side files")
        #expect(chmod(path, 0o644) == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let store = try TokenStore(
            path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), options: .init(readOnly: true))
        #expect(try store.secret(for: ItemKey(account: "alice", kind: .generic))?.stringValue() == "kept")
        #expect(throws: TokenStoreError.invalidInput) {
            try store.set(SecretBytes(utf8: "new"), for: ItemKey(account: "bob", kind: .generic))
        }
        store.close()
        #expect(Self.sideFiles(of: path).isEmpty)
        #expect(FileLayout.mode(of: path) == 0o644)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)

        // While a writer has it open (side files present), the read-only open reads through them.
        #expect(chmod(path, 0o600) == 0)
        let writer = try TokenStore(path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider())
        try writer.set(SecretBytes(utf8: "later"), for: ItemKey(account: "bob", kind: .generic))
        let reader = try TokenStore(
            path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), options: .init(readOnly: true))
        #expect(try reader.secret(for: ItemKey(account: "bob", kind: .generic))?.stringValue() == "later")
        reader.close()
        writer.close()

        // A missing path and an empty file are refused, and nothing is created.
        let missing = directory.appending("none/tokens.sqlite").path
        #expect(throws: TokenStoreError.ioError) {
            _ = try TokenStore(path: missing, appID: testAppID, keyProvider: SecretServiceKeyProvider(), options: .init(readOnly: true))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("none").path))
    }

    @Test("a failed first open (the key provider cannot store the key) leaves no store file and no folder behind")
    func failedFirstOpenLeavesNothing() throws {
        // Found in the trial: a put without D-Bus left an empty 104 KB tokens.sqlite.
        // The real passphrase provider fails to store the key: its key directory is a file.
        let directory = try TemporaryDirectory()
        let keyDirectory = directory.appending("keys").path
        try Data("a file, not a folder".utf8).write(to: URL(fileURLWithPath: keyDirectory))
        let path = directory.appending("new/deeper/tokens.sqlite").path
        let provider = PassphraseKeyProvider(
            storePath: path, passphrase: SecretBytes(utf8: "correct horse"), limits: .interactive,
            keyDirectory: keyDirectory)
        #expect(throws: TokenStoreError.self) { _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider) }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("new").path), "the failed open left files")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["keys"])
    }
}
