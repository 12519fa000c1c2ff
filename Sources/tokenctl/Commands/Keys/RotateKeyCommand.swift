import TokenStore

/// `tokenctl rotate-key`: a new data key, every item re-sealed under it, the old key deleted.
struct RotateKeyCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "rotate-key",
        abstract: "Make a new data key, re-seal every item under it, then delete the old key.",
        discussion: """
            Resumable: if interrupted, the next open of the store finishes or rolls back the \
            rotation, and every item stays readable.
            """)

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let report = try context.withOpenStore(progressLabel: Self.spec.name) { store, progress in
            try store.rotateDataKey(progress: progress)
        }
        let document: JSONValue = [
            "previousKeyID": .string(report.previousKeyIdentifier), "newKeyID": .string(report.newKeyIdentifier),
            "rowsResealed": .int(report.rowsResealed), "batches": .int(report.batches), "resumed": .bool(report.resumed),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["previous key id", report.previousKeyIdentifier])
            table.append(["new key id", report.newKeyIdentifier])
            table.append(["rows re-sealed", String(report.rowsResealed)])
            table.append(["batches", String(report.batches)])
            if report.resumed { table.append(["resumed", "an interrupted rotation was finished"]) }
            return table.rendered()
        }
        return .ok
    }
}
