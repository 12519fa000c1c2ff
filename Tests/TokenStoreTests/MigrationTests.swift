import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

@Suite("Migrations", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct MigrationTests {
    @Test("the embedded list equals the Migrations folder, numbers strictly increasing")
    func embeddedMatchesFolder() throws {
        let folder = repositoryRoot.appendingPathComponent("Migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(!files.isEmpty)
        #expect(files.count == embeddedMigrations.count)
        for (file, migration) in zip(files, embeddedMigrations) {
            #expect(file == String(format: "%04d_%@.sql", migration.version, migration.name))
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(text == migration.sql, "\(file) differs from the embedded copy")
        }
        for (a, b) in zip(embeddedMigrations, embeddedMigrations.dropFirst()) { #expect(a.version < b.version) }
    }

    @Test("the schema the build computed after each migration is the one replaying the migrations makes")
    func builtSchemaEqualsReplay() throws {
        #expect(embeddedSchemas.map(\.version) == embeddedMigrations.map(\.version))
        let latest = embeddedMigrations.last!.version
        for version in 0...(latest + 1) {
            let built = SchemaCheck.builtObjects(version: version, schemas: embeddedSchemas)
            let replayed = try SchemaCheck.replayedObjects(embeddedMigrations.filter { $0.version <= version })
            #expect(built == replayed, "version \(version): \(built.symmetricDifference(replayed).sorted())")
            #expect(try SchemaCheck.expectedObjects(version: version, migrator: Migrator()) == replayed)
            #expect(version == 0 ? built.isEmpty : built.contains { $0.name == "schema_migrations" })
        }
        // And a store file brought up to date by the Migrator has exactly the newest table.
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.appending("m.sqlite").path)
        try Migrator().migrate(db)
        #expect(try SchemaCheck.objects(in: db) == SchemaCheck.builtObjects(version: latest, schemas: embeddedSchemas))
        #expect(try SchemaCheck.differences(in: db).isEmpty)
    }

    @Test("a version-2 store (WITHOUT ROWID items) upgrades to the newest with every item, state and outbox entry intact", keyringTrait)
    func upgradeFromVersion2() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        // A JWT-sized access token: the row that spilled into an overflow page in version 2.
        let jwt = SecretBytes([UInt8]((0..<1_500).map { UInt8(ascii: "a") &+ UInt8($0 % 26) }))
        let expiry = Date(timeIntervalSince1970: 2_000_000_000)
        var written: [ItemKey: SecretBytes] = [:]
        do {
            let old = try TokenStore(
                path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled,
                options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(2))))
            #expect(try old.schemaVersion() == 2)
            for n in 0..<40 {
                let item = key("user\(n)", n % 2 == 0 ? .refreshToken : .generic)
                written[item] = secret("secret-\(n)-" + String(repeating: "x", count: n * 37))
                try old.set(written[item]!, for: item, attributes: .init(label: "label \(n)"))
            }
            // What a session of those days wrote (only through what version 2's tables hold):
            // alice's refresh token, user id and access token as items, her state authorized.
            try old.set(secret("alice-rt"), for: key("alice", .refreshToken))
            try old.set(secret("000123.alice"), for: key("alice", .appleUserID))
            try old.set(jwt, for: key("alice", .accessToken), attributes: .init(expiresAt: expiry, scopes: ["openid", "read"]))
            // This library writes the MACs of schema 7: the columns are lent to the old tables for
            // these writes, the rows made what a library of those days left, and the columns dropped.
            let lent = try Database(path: path)
            for table in ["credential_history", "pending_revocations"] { try lent.execute("ALTER TABLE \(table) ADD COLUMN mac BLOB") }
            try old.recordCredentialState(.authorized, forUserID: "000123.alice", reason: .signIn)
            // An outbox entry: a refresh answer for bob that lost to a newer token is queued.
            try old.set(secret("bob-rt"), for: key("bob", .refreshToken))
            try old.set(secret("000456.bob"), for: key("bob", .appleUserID))
            #expect(
                try old.ledger.replaceRefreshToken(
                    account: "bob", presented: secret("not-bobs"), with: secret("bob-rt-old"), accessToken: nil) == .superseded)
            try makeRowsLegacy(old)
            for table in ["credential_history", "pending_revocations"] { try lent.execute("ALTER TABLE \(table) DROP COLUMN mac") }
            old.close()
        }
        let raw = try Database(path: path)
        let itemsSQL = { try raw.firstRow("SELECT sql FROM sqlite_schema WHERE name = 'items'") { $0.text(0) } ?? "" }
        #expect(try itemsSQL().contains("WITHOUT ROWID"), "the old layout was built")

        let store = try TokenStore(path: path, appID: testAppID)
        #expect(try store.schemaVersion() == TokenStore.supportedSchemaVersion)
        #expect(try !itemsSQL().contains("WITHOUT ROWID"))
        #expect(try raw.firstRow("PRAGMA integrity_check") { $0.text(0) } == "ok")
        for (item, value) in written {
            let stored = try #require(try store.item(for: item))
            #expect(stored.secret == value)
            #expect(stored.attributes.label?.hasPrefix("label ") == true)
        }
        #expect(try store.refreshToken(account: "alice") == secret("alice-rt"))
        #expect(try store.appleUserID(account: "alice") == "000123.alice")
        // A version-5 session kept its access token as an item: it stays an item (the session's
        // cache is the access_tokens table since version 6 and starts empty).
        let legacy = try #require(try store.item(for: ItemKey(account: "alice", kind: .accessToken)))
        #expect(legacy.secret == jwt && legacy.attributes.expiresAt == expiry && legacy.attributes.scopes == ["openid", "read"])
        #expect(try store.ledger.cachedAccessTokens(account: "alice").isEmpty)
        #expect(try store.credentialState(forUserID: "000123.alice") == .authorized)
        #expect(try store.refreshToken(account: "bob") == secret("bob-rt"))
        #expect(try store.pendingRevocations().map(\.refreshToken) == [secret("bob-rt-old")])
        #expect(try store.verify().isHealthy)
        // The upsert keyed on `lookup` still updates in place rather than adding a row.
        let first = try #require(written.keys.first)
        try store.set(secret("replaced"), for: first)
        #expect(try store.secret(for: first) == secret("replaced"))
        #expect(try store.counts().items == written.count + 5, "alice: three items; bob: refresh token and user id")
    }

    @Test("inspect changes nothing: an old store stays at its version, a rollback-journal file stays one", keyringTrait)
    func inspectChangesNothing() throws {
        // Found in review: inspect opened read-write with "create" and switched the file to WAL.
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        do {
            let old = try TokenStore(
                path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled,
                options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(2))))
            try old.set(secret("kept"), for: key("alice"))
            old.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let inspection = try TokenStore.inspect(path: path)
        #expect(inspection.schemaVersion == 2)
        #expect(inspection.pendingMigrations.map(\.version) == TokenStore.knownMigrations.map(\.version).filter { $0 >= 3 })
        #expect(inspection.counts.items == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the database file changed")

        // A plain SQLite file in rollback-journal mode is read, not converted.
        let plain = directory.appending("plain.sqlite").path
        do {
            let db = try Database(path: plain)
            _ = try db.scalarText("PRAGMA journal_mode = DELETE")
            try db.execute("CREATE TABLE t(x INTEGER)")
        }
        try? FileManager.default.removeItem(atPath: plain + "-wal")
        try? FileManager.default.removeItem(atPath: plain + "-shm")
        // Since issue 24 it is refused as another program's database (notAStore) instead of described.
        #expect(throws: TokenStoreError.notAStore) { try TokenStore.inspect(path: plain) }
        let raw = try Database(path: plain, readOnly: true)
        #expect(try raw.scalarText("PRAGMA journal_mode") == "delete")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("missing.sqlite").path))
        #expect(throws: TokenStoreError.ioError) { try TokenStore.inspect(path: directory.appending("missing.sqlite").path) }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("missing.sqlite").path), "inspect created a file")
    }

    @Test("a database newer than the code is schemaTooNew and nothing is written", keyringTrait)
    func schemaTooNew() throws {
        let t = try TestStore()
        t.store.close()
        let raw = try t.rawDatabase()
        try raw.run("INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES (999, 'future', 'x', 0)")
        let before = try raw.scalarInt("SELECT count(*) FROM schema_migrations")
        do {
            _ = try t.reopen()
            Issue.record("expected schemaTooNew")
        } catch let error as TokenStoreError {
            #expect(error.code == .schemaTooNew)
            #expect(error.schemaVersions?.found == 999)
            #expect(error.schemaVersions?.supported == TokenStore.supportedSchemaVersion)
        }
        #expect(try raw.scalarInt("SELECT count(*) FROM schema_migrations") == before)
    }

    @Test("a migration that fails midway is rolled back whole")
    func failedMigrationRollsBack() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.appending("m.sqlite").path)
        let good = Migration(version: 1, name: "one", sql: "CREATE TABLE a(x INTEGER);")
        try Migrator(migrations: [good]).migrate(db)
        let bad = Migration(version: 2, name: "two", sql: "CREATE TABLE b(y INTEGER); INSERT INTO a VALUES (1); SELECT * FROM missing_table;")
        do {
            try Migrator(migrations: [good, bad]).migrate(db)
            Issue.record("expected migrationFailed")
        } catch let error as TokenStoreError {
            #expect(error.code == .migrationFailed)
            #expect(error.cause != nil)
        }
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'b'") == 0)
        #expect(try db.scalarInt("SELECT count(*) FROM a") == 0)
        #expect(try Migrator(migrations: [good, bad]).currentVersion(in: db) == 1)
    }

    @Test("an applied migration whose text changed is migrationFailed")
    func changedMigration() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.appending("m.sqlite").path)
        try Migrator(migrations: [Migration(version: 1, name: "one", sql: "CREATE TABLE a(x INTEGER);")]).migrate(db)
        do {
            try Migrator(migrations: [Migration(version: 1, name: "one", sql: "CREATE TABLE a(x TEXT);")]).migrate(db)
            Issue.record("expected migrationFailed")
        } catch let error as TokenStoreError {
            #expect(error.code == .migrationFailed)
        }
    }
}

@Test("keyring-backed tests are not silently skipped under make test", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
func keyringPresentWhenRequired() {
    if ProcessInfo.processInfo.environment["TOKENSTORE_REQUIRE_KEYRING"] == "1" {
        #expect(PrivateKeyring.isAvailable, "make test must run inside scripts/with-keyring")
    }
}
