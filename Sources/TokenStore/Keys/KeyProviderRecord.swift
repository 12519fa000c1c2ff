import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The kind of key provider that holds the store's data key, recorded in the file
/// (`store_info.key_provider`, schema version 10) with a MAC (`key_provider_mac`, a keyed
/// BLAKE2b under the data key's MAC subkey over the table, the store id and the kind).
///
/// Written when a key is made, and for a store from before version 10 in the open that applies
/// migration 10 (with the key just loaded: the provider that opened it holds it). Re-MACed by a
/// key switch. Read twice at open:
/// - before the key is loaded (the record chooses the provider): a kind other than the one in
///   use is `wrongKeyProvider` naming the recorded one, before the provider is asked for a key;
/// - after the key is loaded: the MAC is checked. A record that was flipped or removed while the
///   key still opens (the provider in use holds it) is `integrityCheckFailed`: the file was
///   changed outside this library. A record flipped to another kind is, to a provider that does
///   not hold the key, indistinguishable from a real one before the key loads: the open then says
///   `wrongKeyProvider`, and opening with the named provider finds no key (`dataKeyMissing`);
///   `reset` refuses while the recorded kind is not the provider in use.
enum KeyProviderRecord {
    static let table = "store_info"

    /// Whether the file has the columns (schema version 10 or later).
    static func hasColumns(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM pragma_table_info('store_info') WHERE name = 'key_provider_mac'") ?? 0) > 0
    }

    /// The recorded kind as the file says it, not checked (no key yet): nil without the
    /// columns, without a store row, or when nothing is recorded.
    static func unchecked(_ db: Database) throws -> KeyProviderKind? {
        guard try hasColumns(db) else { return nil }
        return try db.firstRow("SELECT key_provider FROM store_info WHERE id = 1", []) { row in
            row.isNull(0) ? nil : KeyProviderKind(rawValue: row.text(0))
        } ?? nil
    }

    /// The kind recorded in the store file at `path`, read without the key and without touching
    /// the files (for ``KeyProviderSelection/automatic(storePath:probeTimeout:)``): only from a
    /// layout the open would accept (``FileLayout/looksSafe(databasePath:)``), opened immutable
    /// (no lock, no side file; a record still only in the WAL of a store open elsewhere is not
    /// seen). nil when there is no such file, it cannot be read, or it records none: the open that
    /// follows checks the record itself and reports the file's problems.
    static func recorded(atPath path: String) -> KeyProviderKind? {
        guard FileLayout.looksSafe(databasePath: path) else { return nil }
        do {
            let db = try Database.immutable(path: path)
            return try unchecked(db)
        } catch {
            return nil  // a hint for the choice only: the open itself reports the file's problem
        }
    }

    static func mac(_ kind: KeyProviderKind, envelope: Envelope) -> [UInt8] {
        envelope.mac(.keyProviderMAC, [MACField.name(table), envelope.storeID, Array(kind.rawValue.utf8)])
    }

    /// Records `kind` with its MAC under `envelope`'s key (inside the caller's transaction);
    /// nothing without the columns.
    static func write(_ db: Database, _ kind: KeyProviderKind, envelope: Envelope) throws {
        guard try hasColumns(db) else { return }
        try db.run(
            "UPDATE store_info SET key_provider = ?, key_provider_mac = ? WHERE id = 1",
            [.text(kind.rawValue), .blob(mac(kind, envelope: envelope))])
    }

    /// Before the key is loaded: refuses a store whose record names another kind than `provider`'s.
    /// - Throws: `wrongKeyProvider` (nothing was changed or asked of the provider).
    static func refuseOtherProvider(_ db: Database, provider: any KeyProvider) throws {
        guard let recorded = try unchecked(db), recorded != provider.kind else { return }
        // Another key slot of the provider's kind is a way in (its rows are checked once the key is loaded).
        if try !KeySlots.unchecked(db, kind: provider.kind).isEmpty { return }
        // A name no provider has is damage, not another provider: the open goes on, and the
        // record's MAC check after the key is loaded reports it (integrityCheckFailed). Only a
        // real provider's name is worth a "use that one" (malformed_db flipped a byte of it).
        guard recorded.traits != nil else { return }
        throw wrongProvider(recorded: recorded, inUse: provider.kind)
    }

    static func wrongProvider(recorded: KeyProviderKind, inUse: KeyProviderKind) -> TokenStoreError {
        TokenStoreError(
            .wrongKeyProvider,
            "This store's data key was made by the '\(KeyProviderKind.clipped(recorded.rawValue))' key provider, "
                + "not '\(KeyProviderKind.clipped(inUse.rawValue))', the one it was opened with. Nothing was changed.",
            hint: recorded.openingAdvice + " Do not reset the store: its data is intact.", recordedKeyProvider: recorded)
    }

    /// With the store's key: the recorded kind, checked against its MAC.
    /// - Returns: the kind; nil for a store below schema version 10.
    /// - Throws: `integrityCheckFailed` when the record or its MAC was altered or removed.
    @discardableResult
    static func check(_ db: Database, envelope: Envelope) throws -> KeyProviderKind? {
        guard try hasColumns(db) else { return nil }
        let row = try db.firstRow("SELECT key_provider, key_provider_mac FROM store_info WHERE id = 1", []) { row in
            (row.isNull(0) ? nil : row.text(0), row.isNull(1) ? nil : row.blob(1))
        }
        if case let (name?, mac?)? = row, case let kind = KeyProviderKind(rawValue: name),
            MACField.equal(mac, Self.mac(kind, envelope: envelope))
        {
            return kind
        }
        throw TokenStoreError(
            .integrityCheckFailed,
            "The store's key-provider record was altered or removed (its MAC does not match): the file was changed outside this library.",
            hint: "Restore the store file from a backup.")
    }

    /// In a key switch: the record, checked under `current`, re-MACed under `next`.
    static func rewrite(_ db: Database, from current: Envelope, to next: Envelope) throws {
        guard let kind = try check(db, envelope: current) else { return }
        try write(db, kind, envelope: next)
    }
}
