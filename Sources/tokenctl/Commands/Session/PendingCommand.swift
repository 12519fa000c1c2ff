import TokenStore

/// `tokenctl pending`: the revocations waiting in the outbox; never a refresh token. A row
/// that does not open is listed by its id, marked unreadable (exit 65).
struct PendingCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "pending",
        abstract: "List the outbox: account, attempts, next attempt, last error.",
        discussion: """
            Rows that do not open (tampered or damaged) are listed by id, marked UNREADABLE, \
            and the exit status is 65; 'tokenctl discard --entry ID' removes one.
            """)

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        let list = try store.ledger.pendingRevocationList()
        let entries = list.entries
        let document: JSONValue = [
            "count": .int(entries.count),
            "entries": .array(entries.map { entry in
                // Never the refresh token itself.
                [
                    "id": .string(entry.id), "service": .string(entry.account.service), "account": .string(entry.account.name),
                    "reason": .string(entry.reason.rawValue), "attempts": .int(entry.attempts),
                    "nextAttemptAt": .string(Format.date(entry.nextAttemptAt)),
                    "lastError": Format.optional(entry.lastError), "failureCode": Format.optional(entry.failureCode),
                    "createdAt": .string(Format.date(entry.createdAt)),
                ]
            }),
            "unreadable": .array(list.unreadable.map { row in
                ["id": .string(row.id), "reason": .string(row.reason), "createdAt": .string(Format.date(row.createdAt))]
            }),
        ]
        context.emit(document) {
            guard !entries.isEmpty || !list.unreadable.isEmpty else { return "No pending revocations.\n" }
            var text = ""
            if !entries.isEmpty {
                var table = TextTable(header: ["ACCOUNT", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR", "FAILURE", "ID"])
                table.alignments = [.left, .right]
                for entry in entries {
                    table.append([
                        entry.account.name, String(entry.attempts), Format.date(entry.nextAttemptAt), entry.lastError ?? "-",
                        entry.failureCode ?? "-", entry.id,
                    ])
                }
                text += table.rendered()
            }
            if !list.unreadable.isEmpty {
                if !text.isEmpty { text += "\n" }
                var table = TextTable(header: ["UNREADABLE ROW", "CREATED", "REASON"])
                for row in list.unreadable { table.append(["\(row.id) [UNREADABLE]", Format.date(row.createdAt), row.reason]) }
                text += table.rendered()
            }
            return text
        }
        if !list.unreadable.isEmpty {
            context.console.writeError(
                "tokenctl: warning: \(list.unreadable.count) outbox row(s) do not open; their tokens cannot be revoked. "
                    + "Restore the store from a backup, or remove one with 'tokenctl discard --entry ID'\n")
            return .dataError
        }
        return .ok
    }
}
