import Foundation
import Testing
import TestSupport
@testable import TokenStore

@Suite("Migrations")
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

@Test("keyring-backed tests are not silently skipped under make test")
func keyringPresentWhenRequired() {
    if ProcessInfo.processInfo.environment["TOKENSTORE_REQUIRE_KEYRING"] == "1" {
        #expect(PrivateKeyring.isAvailable, "make test must run inside scripts/with-keyring")
    }
}
