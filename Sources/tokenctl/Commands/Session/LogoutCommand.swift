import AuthSession
import TokenStore

/// `tokenctl logout`: revokes the refresh token, deletes the account's items and records the
/// logout; a revocation that cannot reach the server waits in the outbox (exit 75).
struct LogoutCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "logout",
        abstract: "Revoke the refresh token, delete the account's items and record the logout.",
        discussion: """
            When the revocation cannot reach the server, the account is still signed out and \
            the revocation is kept in the outbox for 'tokenctl resume --all'; the exit status is then 75.
            """,
        options: [ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, ItemOptions.account])

    let server: ServerOptions
    let account: String

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        let outcome = try waitFor { try await session.logout(account: AccountID(account)) }
        let pending = try store.ledger.pendingRevocationList().entries.filter { $0.account == AccountID(account) }.count

        let name: String
        var failureCode: String?
        let status: ExitCode
        let explanation: String
        switch outcome {
        case .revoked:
            (name, status) = ("revoked", .ok)
            explanation = "Logged out: the refresh token was revoked at the server and the local entries deleted."
        case .notFound:
            (name, status) = ("notFound", .ok)
            explanation = "Nothing was stored for this account; no request was made."
                + (try UnknownAccount.check(AccountID(account), in: store).map { " " + $0.sentence } ?? "")
        case .revocationPending:
            (name, status) = ("revocationPending", .tempFailure)
            explanation = "Logged out here, but the server could not be reached: the refresh token waits in the "
                + "outbox. Run 'tokenctl resume --all' when the server is reachable."
        case .revocationFailed(let code):
            (name, status) = ("revocationFailed", .failure)
            failureCode = code.rawValue
            explanation = "Logged out here, but the server refused the revocation for good (\(code.rawValue)): a "
                + "configuration error. The token stays in the outbox, flagged; see 'tokenctl pending'."
        case .notRevocable:
            (name, status) = ("notRevocable", .ok)
            explanation = "Logged out here: the server has no revocation endpoint, so the refresh token was deleted "
                + "locally and stays valid at the server until it expires. Nothing was queued."
        }
        let document: JSONValue = [
            "account": .string(account), "outcome": .string(name), "failureCode": Format.optional(failureCode),
            "pendingRevocations": .int(pending),
        ]
        context.emit(document) { "\(name)\n\(explanation)\n" }
        if status != .ok, context.json {
            context.console.writeError("tokenctl: warning: \(explanation)\n")
        }
        return status
    }
}
