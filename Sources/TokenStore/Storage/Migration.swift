/// One numbered schema migration from the top-level `Migrations/` folder.
///
/// The list is compiled into the library by the `EmbedMigrations` build-tool plugin
/// (`embeddedMigrations`); nothing is read from disk at run time.
struct Migration: Sendable {
    let version: Int
    let name: String
    let sql: String

    /// BLAKE2b-256 of the SQL text, hex: recorded when applied, compared on every open.
    var checksum: String { Blake2b.hexDigest(Array(sql.utf8)) }
}

/// `sqlite_schema` after one migration, as the `EmbedMigrations` plugin computed it at build time
/// (the migrations up to `version` replayed into an in-memory SQLite database; SQLite's own
/// `sqlite_%` objects left out).
struct EmbeddedSchema: Sendable {
    let version: Int
    /// type, name, tbl_name, sql (`""` for none).
    let rows: [(String, String, String, String)]
}
