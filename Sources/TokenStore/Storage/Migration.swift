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
