import AuthSession
import TokenStore

/// `tokenctl resume [--all] [--include-failed]`: retries the pending revocations that are due
/// (all of them with `--all`, flagged ones too with `--include-failed`) and reports what happened.
struct ResumeCommand: TokenctlCommand {
    static let all = OptionSpec.flag("all", "Also retry the entries whose next attempt is not due yet.")
    static let includeFailed = OptionSpec.flag(
        "include-failed", "Also retry now the revocations the server refused for good (otherwise retried after hours).")

    static let spec = CommandSpec(
        "resume",
        abstract: "Retry the pending revocations and print what happened.",
        discussion: """
            Retries the entries whose next attempt is due, or every entry with --all; those the \
            server refused for good (flagged) wait out a long backoff unless --include-failed is \
            given. Exits 0 when the outbox holds nothing left to retry, 65 when an outbox row does \
            not open (see 'tokenctl pending'), 1 while flagged entries remain, 75 while others \
            still wait (unreachable server, or not due).
            """,
        options: [ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, all, includeFailed])

    let server: ServerOptions
    let includingNotDue: Bool
    let includingFailed: Bool

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        includingNotDue = parsed.isSet(Self.all)
        includingFailed = parsed.isSet(Self.includeFailed)
    }

    func run(_ context: CommandContext) async throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        let report = try await session.resumePendingRevocations(includingNotDue: includingNotDue, includingFailed: includingFailed)
        let list = try store.ledger.pendingRevocationList()
        let remaining = list.entries.count + list.unreadable.count
        let flagged = list.entries.filter { $0.failureCode != nil }.count
        let document: JSONValue = [
            "revoked": .int(report.revoked), "stillPending": .int(report.stillPending), "failed": .int(report.failed),
            "notDue": .int(report.notDue), "unreadable": .int(report.unreadable), "flagged": .int(flagged),
            "remaining": .int(remaining),
        ]
        context.emit(document) {
            var table = TextTable(header: nil, alignments: [.left, .right])
            table.append(["revoked", String(report.revoked)])
            table.append(["still pending", String(report.stillPending)])
            table.append(["not due yet", String(report.notDue)])
            table.append(["refused by the server", String(report.failed)])
            table.append(["unreadable rows skipped", String(report.unreadable)])
            table.append(["left in the outbox", String(remaining)])
            table.append(["of which flagged", String(flagged)])
            return table.rendered()
        }
        if report.unreadable > 0 {
            context.console.writeError(
                "tokenctl: warning: \(report.unreadable) outbox row(s) do not open; see 'tokenctl pending', "
                    + "'tokenctl discard --entry ID'\n")
            return .dataError
        }
        if report.failed > 0 || flagged > 0 { return .failure }
        if report.stillPending > 0 || report.notDue > 0 { return .tempFailure }
        return .ok
    }
}
