import FoundationEssentials

/// Compares a store's `sqlite_schema` with the schema its applied migrations make.
///
/// Someone who can write the file but has no key can still add a trigger, a view, an index or
/// a table, or change one (the review's planted `RAISE(IGNORE)` trigger made a logout drop a
/// refresh token it never revoked). Connections run with triggers and views off, and an open
/// refuses a schema that differs from the expected one with `schemaTampered`.
///
/// The expected schema is computed, not stored in the file: the build replays the embedded
/// migrations (the MigrationEmbedder) and compiles the schema after each into the library
/// (``embeddedSchemas``); any other list of migrations (tests) is replayed into a private
/// in-memory database here (cached per list). MigrationTests checks that both agree.
enum SchemaCheck {
    /// One schema object as compared: type, name, table, and its SQL with whitespace collapsed.
    struct Object: Hashable, Comparable {
        let type: String
        let name: String
        let table: String
        let sql: String

        static func < (lhs: Object, rhs: Object) -> Bool {
            (lhs.type, lhs.name, lhs.table, lhs.sql) < (rhs.type, rhs.name, rhs.table, rhs.sql)
        }
    }

    /// What differs between `db`'s schema and the one `migrator`'s migrations make at the
    /// store's version, one line each (names clipped to printable ASCII); empty when it matches.
    ///
    /// The version and the schema are read in one read transaction: read apart, another process's
    /// migration committed between the two reads made a store at the new schema look tampered with
    /// against the old version's (a second first opener failed `schemaTampered` in CI).
    static func differences(in db: Database, migrator: Migrator = Migrator()) throws -> [String] {
        let (version, found) = try db.readTransaction { () throws -> (Int, Set<Object>) in
            let version = try migrator.currentVersion(in: db)
            CrashPoint.reach("schemaCheck.betweenReads")
            return (version, try objects(in: db))
        }
        let expected = try expectedObjects(version: version, migrator: migrator)
        var lines: [String] = []
        let expectedByName = Dictionary(expected.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let foundByName = Dictionary(found.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for object in found.sorted() where !expected.contains(object) {
            if expectedByName[object.name] != nil {
                lines.append("\(object.type) '\(clip(object.name))' differs from the one the migrations make")
            } else {
                lines.append("unexpected \(object.type) '\(clip(object.name))' on '\(clip(object.table))'")
            }
        }
        for object in expected.sorted() where foundByName[object.name] == nil {
            lines.append("missing \(object.type) '\(clip(object.name))'")
        }
        return lines
    }

    /// Throws `schemaTampered` when `db`'s schema is not the expected one.
    static func check(_ db: Database, migrator: Migrator = Migrator()) throws {
        let differences = try differences(in: db, migrator: migrator)
        guard differences.isEmpty else {
            throw TokenStoreError(
                .schemaTampered,
                "The database schema is not the one its migrations make (\(differences.count) difference(s): "
                    + differences.prefix(3).joined(separator: "; ") + "); refusing to use it.",
                hint: "The file was changed outside this library. Restore it from a backup.")
        }
    }

    /// Every object of `db`'s schema except SQLite's own (`sqlite_%`: autoindexes, statistics).
    static func objects(in db: Database) throws -> Set<Object> {
        var objects: Set<Object> = []
        try db.forEachRow("SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'") { row in
            objects.insert(Object(type: row.text(0), name: row.text(1), table: row.text(2), sql: normalized(row.textOrNil(3) ?? "")))
        }
        return objects
    }

    /// The objects `migrator`'s migrations up to `version` make: the build's table for the
    /// embedded migrations, else replayed.
    static func expectedObjects(version: Int, migrator: Migrator) throws -> Set<Object> {
        if let built = migrator.builtSchemas {
            return builtObjects(version: version, schemas: built)
        }
        return try replayedObjects(migrator.migrations.filter { $0.version <= version })
    }

    /// The schema after the newest of `schemas` at or below `version` (none: empty).
    static func builtObjects(version: Int, schemas: [EmbeddedSchema]) -> Set<Object> {
        guard let schema = schemas.last(where: { $0.version <= version }) else { return [] }
        return Set(schema.rows.map { Object(type: $0.0, name: $0.1, table: $0.2, sql: normalized($0.3)) })
    }

    /// The objects `migrations` make, applied to an in-memory database (cached per list).
    static func replayedObjects(_ migrations: [Migration]) throws -> Set<Object> {
        let cacheKey = migrations.map(\.checksum).joined(separator: ",")
        if let cached = cache.value(for: cacheKey) { return cached }
        let memory = try Database.inMemory()
        try Migrator(migrations: migrations).migrate(memory)
        let objects = try objects(in: memory)
        cache.store(objects, for: cacheKey)
        return objects
    }

    private static let cache = ExpectedSchemaCache()

    static func normalized(_ sql: String) -> String {
        sql.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }).joined(separator: " ")
    }

    /// A name from the file, safe for an error text or a terminal: printable ASCII, at most 64 characters.
    private static func clip(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f && $0 != "'" }
        return String(String.UnicodeScalarView(printable.prefix(64)))
    }
}

/// The expected schema per list of migrations, computed once per process.
private final class ExpectedSchemaCache: Sendable {
    private let entries = Locked<[String: Set<SchemaCheck.Object>]>([:])

    func value(for key: String) -> Set<SchemaCheck.Object>? { entries.withLock { $0[key] } }
    func store(_ value: Set<SchemaCheck.Object>, for key: String) { entries.withLock { $0[key] = value } }
}
