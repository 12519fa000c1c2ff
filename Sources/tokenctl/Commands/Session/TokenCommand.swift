import AuthSession
import TokenStore

/// `tokenctl token`: gets an access token silently and prints its expiry and scopes; the token
/// itself only with `--reveal`.
struct TokenCommand: TokenctlCommand {
    static let reveal = OptionSpec.flag(
        "reveal", "Also print the access token. Warns on stderr when stdout is a terminal.")

    static let spec = CommandSpec(
        "token",
        abstract: "Get an access token silently; print its expiry and scopes.",
        discussion: "The access token itself is printed only with --reveal.",
        options: [ServerOptions.domain, ServerOptions.clientID, ItemOptions.account, ServerOptions.scope, reveal])

    let server: ServerOptions
    let account: String
    let scopes: [String]
    let reveal: Bool

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
        scopes = ServerOptions.scopes(parsed, default: [])
        reveal = parsed.isSet(Self.reveal)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let session = try server.openSession(context).session
        let token = try waitFor { try await session.accessToken(for: AccountID(account), scopes: scopes) }
        var document: [String: JSONValue] = [
            "account": .string(account), "expiresAt": Format.date(token.expiresAt),
            "scopes": Format.strings(token.grantedScopes), "source": .string(token.source.rawValue),
        ]
        if reveal {
            RevealWarning.emitIfNeeded(on: context.console)
            // The token becomes a String only here, at the edge, because the user asked for it.
            document["accessToken"] = Format.optional(token.token.stringValue())
        }
        context.emit(.object(document)) {
            var table = TextTable(header: nil)
            table.append(["account", account])
            table.append(["expires", token.expiresAt.map(Format.date) ?? "unknown"])
            table.append(["scopes", token.grantedScopes.joined(separator: " ")])
            table.append(["source", token.source.rawValue])
            if reveal { table.append(["access token", token.token.stringValue() ?? "(not UTF-8)"]) }
            return table.rendered()
        }
        return .ok
    }
}
