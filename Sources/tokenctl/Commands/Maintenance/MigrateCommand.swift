import TokenStore

/// `tokenctl migrate`: applies the pending schema migrations, or lists them with `--dry-run`.
struct MigrateCommand: TokenctlCommand {
    static let dryRun = OptionSpec.flag("dry-run", "List the pending migrations without applying them.")

    static let spec = CommandSpec(
        "migrate",
        abstract: "Apply the pending schema migrations.",
        options: [dryRun])

    let dryRun: Bool

    init(parsed: ParsedCommand) {
        dryRun = parsed.isSet(Self.dryRun)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        let before = try TokenStore.inspect(path: location.path)
        let migrations = before.pendingMigrations
        let toVersion: Int
        if dryRun {
            toVersion = migrations.last?.version ?? before.schemaVersion
        } else {
            // Opening the store applies the pending migrations, each in its own transaction.
            let store = try context.openStore()
            toVersion = try store.schemaVersion()
            store.close()
        }
        let document: JSONValue = [
            "dryRun": .bool(dryRun), "fromVersion": .int(before.schemaVersion), "toVersion": .int(toVersion),
            "supportedSchemaVersion": .int(before.supportedSchemaVersion),
            "migrations": .array(migrations.map(Format.migration)),
        ]
        context.emit(document) {
            if migrations.isEmpty { return "Schema version \(before.schemaVersion): nothing to migrate.\n" }
            var text = dryRun
                ? "Pending migrations (schema version \(before.schemaVersion) → \(toVersion)):\n"
                : "Applied migrations (schema version \(before.schemaVersion) → \(toVersion)):\n"
            var table = TextTable(header: ["VERSION", "NAME"])
            table.alignments = [.right]
            for migration in migrations { table.append([String(migration.version), migration.name]) }
            text += table.rendered()
            return text
        }
        return .ok
    }
}
