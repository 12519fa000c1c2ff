import FoundationEssentials

/// Applies the embedded migrations in order, each in its own IMMEDIATE transaction.
///
/// - A database whose newest applied version is above the newest known one is
///   `schemaTooNew`, and nothing is written.
/// - A migration that fails is rolled back whole (`migrationFailed`).
/// - An applied migration whose recorded checksum differs from the embedded text is
///   `migrationFailed`: shipped migrations are never edited.
struct Migrator {
    let migrations: [Migration]
    /// The schema after each migration, computed at build time (``embeddedSchemas``) when
    /// `migrations` are the embedded ones; nil for any other list (tests), which
    /// ``SchemaCheck`` replays instead.
    let builtSchemas: [EmbeddedSchema]?

    /// The embedded migrations, with the schemas the build computed for them.
    init() {
        migrations = embeddedMigrations
        builtSchemas = embeddedSchemas
    }

    init(migrations: [Migration]) {
        self.migrations = migrations
        builtSchemas = nil
    }

    var latestVersion: Int { migrations.last?.version ?? 0 }

    /// The versions not yet applied to `db`, checking the applied ones on the way.
    func pendingMigrations(in db: Database) throws -> [Migration] {
        let applied = try appliedMigrations(in: db)
        if let newest = applied.keys.max(), newest > latestVersion {
            throw TokenStoreError(
                .schemaTooNew,
                "The database schema (version \(newest)) is newer than this library supports (version \(latestVersion)).",
                hint: "Update the app, or open the store with the newer version that wrote it.",
                schemaVersions: (newest, latestVersion))
        }
        for migration in migrations {
            if let checksum = applied[migration.version], checksum != migration.checksum {
                throw TokenStoreError(
                    .migrationFailed,
                    "Applied migration \(migration.version) (\(migration.name)) differs from the one embedded in this library.")
            }
        }
        return migrations.filter { applied[$0.version] == nil }
    }

    /// Applies every pending migration up to version `limit`; returns the versions it applied.
    /// `afterSQL` runs inside each migration's transaction, after its SQL (a Swift step that
    /// needs the data key, such as ``RowMACBackfill``); when it throws, the migration is rolled back.
    @discardableResult
    func migrate(_ db: Database, upTo limit: Int = .max, afterSQL: (Migration) throws -> Void = { _ in }) throws -> [Int] {
        guard try pendingMigrations(in: db).contains(where: { $0.version <= limit }) else { return [] }
        var done: [Int] = []
        for migration in migrations where migration.version <= limit {
            let appliedNow = try db.writeTransaction { () throws -> Bool in
                try createLedgerIfNeeded(db)
                // Another process may have applied it while we waited for the lock.
                guard try pendingMigrations(in: db).contains(where: { $0.version == migration.version }) else {
                    return false
                }
                do {
                    try db.execute(migration.sql)
                } catch let error as TokenStoreError {
                    throw TokenStoreError(
                        .migrationFailed, "Migration \(migration.version) (\(migration.name)) failed and was rolled back.",
                        cause: error.cause)
                }
                try afterSQL(migration)
                try db.run(
                    "INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                    [.int(Int64(migration.version)), .text(migration.name), .text(migration.checksum), .int(Timestamp.nowMillis())])
                return true
            }
            if appliedNow { done.append(migration.version) }
        }
        return done
    }

    /// The schema version recorded in `db` (0 for a new file).
    func currentVersion(in db: Database) throws -> Int {
        try appliedMigrations(in: db).keys.max() ?? 0
    }

    private func appliedMigrations(in db: Database) throws -> [Int: String] {
        let exists = try db.scalarInt(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'") ?? 0
        guard exists > 0 else { return [:] }
        var applied: [Int: String] = [:]
        try db.forEachRow("SELECT version, checksum FROM schema_migrations") { row in
            applied[Int(row.int(0))] = row.text(1)
        }
        return applied
    }

    /// The ledger's text is the MigrationEmbedder's (`schemaMigrationsLedgerSQL`), so the schema
    /// it computes at build time has the ledger every store has.
    private func createLedgerIfNeeded(_ db: Database) throws {
        try db.execute(schemaMigrationsLedgerSQL)
    }
}
