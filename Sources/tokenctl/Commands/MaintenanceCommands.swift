import TokenStore

/// `verify` and `migrate`: checking the database and its schema.
enum MaintenanceCommands {
    // MARK: verify

    static func verify(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        let progress = ProgressReporter(label: "verify", console: context.console, quiet: context.global.quiet)
        let report = try store.verify { done, total in progress.update(done: done, total: total) }
        progress.finish()
        let document: JSONValue = [
            "healthy": .bool(report.isHealthy),
            "integrityCheck": Format.strings(report.integrityCheck),
            "rowsChecked": .int(report.rowsChecked),
            "badRows": .array(report.badRows.map { row in
                ["table": .string(row.table), "rowID": .string(row.rowID), "reason": .string(row.reason)]
            }),
        ]
        context.emit(document) {
            var summary = TextTable(header: nil)
            summary.append(["integrity check", report.integrityCheck.joined(separator: "; ")])
            summary.append(["rows checked", String(report.rowsChecked)])
            summary.append(["bad rows", String(report.badRows.count)])
            var text = summary.rendered()
            if !report.badRows.isEmpty {
                var table = TextTable(header: ["TABLE", "ROW", "REASON"])
                for row in report.badRows { table.append([row.table, row.rowID, row.reason]) }
                text += "\n" + table.rendered()
            }
            return text
        }
        guard report.isHealthy else {
            throw CommandFailure(
                .dataError,
                "the store failed verification: \(report.badRows.count) bad row(s)"
                    + (report.integrityCheck == ["ok"] ? "" : ", integrity_check failed"),
                hint: "a bad row was tampered with or damaged; delete its item ('tokenctl delete') or restore the store from a backup")
        }
        return .ok
    }

    // MARK: migrate

    static func migrate(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        let before = try TokenStore.inspect(path: location.path)
        let dryRun = context.command.hasFlag("dry-run")
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
            "migrations": .array(migrations.map(json)),
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

    static func json(_ migration: StoreInspection.MigrationInfo) -> JSONValue {
        ["version": .int(migration.version), "name": .string(migration.name)]
    }
}
