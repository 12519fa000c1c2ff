import AuthSession
import TokenStore

/// `tokenctl resume [--all]`: retries the pending revocations that are due (all of them with
/// `--all`) and reports what happened.
struct ResumeCommand: TokenctlCommand {
    static let all = OptionSpec.flag("all", "Also retry the entries whose next attempt is not due yet.")

    static let spec = CommandSpec(
        "resume",
        abstract: "Retry the pending revocations and print what happened.",
        discussion: """
            Retries the entries whose next attempt is due, or every entry with --all; never \
            those the server refused for good (see 'tokenctl pending'). Exits 0 when the \
            outbox holds nothing left to retry, 75 when entries still wait (unreachable \
            server, or not due), 1 when the server refused one.
            """,
        options: [ServerOptions.domain, ServerOptions.clientID, all])

    let server: ServerOptions
    let includingNotDue: Bool

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        includingNotDue = parsed.isSet(Self.all)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        let report = try waitFor { try await session.resumePendingRevocations(includingNotDue: includingNotDue) }
        let remaining = try store.pendingRevocations().count
        let document: JSONValue = [
            "revoked": .int(report.revoked), "stillPending": .int(report.stillPending), "failed": .int(report.failed),
            "notDue": .int(report.notDue), "remaining": .int(remaining),
        ]
        context.emit(document) {
            var table = TextTable(header: nil, alignments: [.left, .right])
            table.append(["revoked", String(report.revoked)])
            table.append(["still pending", String(report.stillPending)])
            table.append(["not due yet", String(report.notDue)])
            table.append(["refused by the server", String(report.failed)])
            table.append(["left in the outbox", String(remaining)])
            return table.rendered()
        }
        if report.failed > 0 { return .failure }
        if report.stillPending > 0 || report.notDue > 0 { return .tempFailure }
        return .ok
    }
}
