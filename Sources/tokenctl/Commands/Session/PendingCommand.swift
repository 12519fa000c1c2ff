import TokenStore

/// `tokenctl pending`: the revocations waiting in the outbox; never a refresh token.
struct PendingCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "pending",
        abstract: "List the outbox: account, attempts, next attempt, last error.")

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        let entries = try store.pendingRevocations()
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
        ]
        context.emit(document) {
            guard !entries.isEmpty else { return "No pending revocations.\n" }
            var table = TextTable(header: ["ACCOUNT", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR", "FAILURE"])
            table.alignments = [.left, .right]
            for entry in entries {
                table.append([
                    entry.account.name, String(entry.attempts), Format.date(entry.nextAttemptAt), entry.lastError ?? "-",
                    entry.failureCode ?? "-",
                ])
            }
            return table.rendered()
        }
        return .ok
    }
}
