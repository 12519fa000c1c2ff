import AuthSession
import TokenStore

/// `tokenctl resume`: retries every pending revocation now and reports what happened.
struct ResumeCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "resume",
        abstract: "Retry the pending revocations and print what happened.",
        options: [ServerOptions.domain, ServerOptions.clientID])

    let server: ServerOptions

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        // A person asked for it now: every entry not refused for good is tried, due or not.
        let report = try waitFor { try await session.logoutCoordinator.resumePendingRevocations(now: .distantFuture) }
        let remaining = try store.pendingRevocations().count
        let document: JSONValue = [
            "revoked": .int(report.revoked), "stillPending": .int(report.stillPending), "failed": .int(report.failed),
            "notDue": .int(report.notDue), "remaining": .int(remaining),
        ]
        context.emit(document) {
            var table = TextTable(header: nil, alignments: [.left, .right])
            table.append(["revoked", String(report.revoked)])
            table.append(["still pending", String(report.stillPending)])
            table.append(["refused by the server", String(report.failed)])
            table.append(["left in the outbox", String(remaining)])
            return table.rendered()
        }
        if report.failed > 0 { return .failure }
        if report.stillPending > 0 { return .tempFailure }
        return .ok
    }
}
