import TokenStore

/// `tokenctl verify`: the database's integrity check, then every sealed row opened; exit 65 when
/// anything is wrong.
struct VerifyCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "verify",
        abstract: "Check the database's integrity and open every sealed row.",
        discussion: """
            Runs PRAGMA integrity_check, then opens every sealed row and reports each bad row \
            by id and reason, and shows the store epoch in the file and in the key provider. \
            Exits 65 when anything is wrong (a store file restored from an older copy fails \
            to open with storeRolledBack).
            """)

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let report = try context.withOpenStore(progressLabel: Self.spec.name, readOnly: true) { store, progress in
            try store.verify(progress: progress)
        }
        let document: JSONValue = [
            "healthy": .bool(report.isHealthy),
            "integrityCheck": Format.strings(report.integrityCheck),
            "rowsChecked": .int(report.rowsChecked),
            "schemaDifferences": Format.strings(report.schemaDifferences),
            "epoch": ["file": .int(Int(report.epoch.file)), "keyProvider": .int(Int(report.epoch.keyProvider))],
            "badRows": .array(report.badRows.map { row in
                ["table": .string(row.table), "rowID": .string(row.rowID), "reason": .string(row.reason)]
            }),
        ]
        context.emit(document) {
            var summary = TextTable(header: nil)
            summary.append(["integrity check", report.integrityCheck.joined(separator: "; ")])
            summary.append(["rows checked", String(report.rowsChecked)])
            summary.append(["bad rows", String(report.badRows.count)])
            summary.append(["schema", report.schemaDifferences.isEmpty ? "as migrated" : "\(report.schemaDifferences.count) difference(s)"])
            summary.append(["epoch", "file \(report.epoch.file), key provider \(report.epoch.keyProvider)"])
            var text = summary.rendered()
            if !report.badRows.isEmpty {
                var table = TextTable(header: ["TABLE", "ROW", "REASON"])
                for row in report.badRows { table.append([row.table, row.rowID, row.reason]) }
                text += "\n" + table.rendered()
            }
            for line in report.schemaDifferences { text += "schema: \(line)\n" }
            return text
        }
        guard report.isHealthy else {
            throw CommandFailure(
                .dataError,
                "the store failed verification: \(report.badRows.count) bad row(s)"
                    + (report.integrityCheck == ["ok"] ? "" : ", integrity_check failed")
                    + (report.schemaDifferences.isEmpty ? "" : ", the schema was changed outside TokenStore")
                    + (report.epoch.isRolledBack ? ", the file is older than its epoch in the key provider" : ""),
                hint: "a bad row was tampered with or damaged; delete its item ('tokenctl delete') or restore the store from a backup")
        }
        return .ok
    }
}
