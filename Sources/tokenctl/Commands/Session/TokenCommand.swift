import AuthSession
import TokenStore

/// `tokenctl token`: gets an access token silently — from the cache, or by a refresh — and
/// prints its audience, expiry, granted and declined scopes; the token itself only with `--reveal`.
struct TokenCommand: TokenctlCommand {
    static let audience = OptionSpec.value(
        "audience", "api", "The API the access token is for (default: the tenant's default API).")
    static let requireScope = OptionSpec.value(
        "require-scope", "scope", repeatable: true,
        "A scope that must be granted (also requested); repeat for several.")
    static let minimumTTL = OptionSpec.value(
        "min-ttl", "seconds", rule: .nonNegativeInteger,
        "The shortest remaining lifetime accepted from the cache (default: 60).")
    static let force = OptionSpec.flag("force", "Refresh at the server whatever the cache holds.")
    static let reveal = OptionSpec.flag(
        "reveal", "Also print the access token. Warns on stderr when stdout is a terminal.")

    static let defaultMinimumTTLSeconds = 60

    static let spec = CommandSpec(
        "token",
        abstract: "Get an access token silently; print its expiry and scopes.",
        discussion: """
            Access tokens are cached per account, audience and scope set; one refresh token \
            serves every audience. A cached token is used when it lives at least --min-ttl \
            more seconds, else the account's refresh token gets a new one. The access token \
            itself is printed only with --reveal.

            A --min-ttl longer than the server's access tokens live cannot be met by any \
            refresh: after at most one refresh the command exits 78 (EX_CONFIG: the server's \
            configuration cannot give what was asked) with a hint naming the lifetime. \
            A required scope the server declines exits 1 (serverDeclinedScopes).

            The token type is DPoP for a session signed in with 'login --dpop' (from the cache \
            too), else Bearer; 'tokenctl proof' makes the proof to send with a DPoP token.
            """,
        options: [
            ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, ItemOptions.account, audience, ServerOptions.scope,
            requireScope, minimumTTL, force, reveal,
        ],
        mutuallyExclusive: [[minimumTTL.name, force.name]])

    let server: ServerOptions
    let account: String
    let audience: String?
    let scopes: [String]
    let requiredScopes: [String]
    let minimumTTL: Duration
    let forceRefresh: Bool
    let reveal: Bool

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
        audience = parsed.value(Self.audience)
        requiredScopes = parsed.values(Self.requireScope).flatMap { $0.split(separator: " ").map(String.init) }
        // A required scope is also asked for: the server cannot grant what was not requested.
        var scopes = ServerOptions.scopes(parsed, default: [])
        for scope in requiredScopes where !scopes.contains(scope) { scopes.append(scope) }
        self.scopes = scopes
        // The parser checked the value is a non-negative Int32.
        minimumTTL = .seconds(parsed.value(Self.minimumTTL).flatMap(Int.init) ?? Self.defaultMinimumTTLSeconds)
        forceRefresh = parsed.isSet(Self.force)
        reveal = parsed.isSet(Self.reveal)
    }

    func run(_ context: CommandContext) async throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        let token: AccessToken
        do {
            token = try await session.accessToken(
                for: AccountID(account), audience: audience, scopes: scopes, minimumTTL: minimumTTL,
                requiringScopes: requiredScopes, forceRefresh: forceRefresh)
        } catch let error as AuthSessionError where error.code == .interactionRequired {
            // A name the store does not know: point at the name before a new sign-in.
            guard let unknown = try UnknownAccount.check(AccountID(account), in: store) else { throw error }
            throw CommandFailure(.failure, "\(error.message) [\(error.code.rawValue)]", hint: unknown.hint)
        }
        var document: [String: JSONValue] = [
            "account": .string(account), "audience": Format.optional(token.audience),
            "expiresAt": Format.date(token.expiresAt), "grantedScopes": Format.strings(token.grantedScopes),
            // `scopes` predates `grantedScopes` and stays: JSON keys are never removed.
            "scopes": Format.strings(token.grantedScopes), "declinedScopes": Format.strings(token.declinedScopes),
            "source": .string(token.source.rawValue), "tokenType": .string(token.tokenType),
        ]
        if reveal {
            RevealWarning.emitIfNeeded(on: context.console)
            // The token becomes a String only here, at the edge, because the user asked for it.
            document["accessToken"] = Format.optional(token.token.stringValue())
        }
        context.emit(.object(document)) {
            var table = TextTable(header: nil)
            table.append(["account", account])
            table.append(["audience", token.audience ?? "(default)"])
            table.append(["expires", token.expiresAt.map(Format.date) ?? "unknown"])
            table.append(["scopes", token.grantedScopes.joined(separator: " ")])
            table.append(["declined", token.declinedScopes.isEmpty ? "-" : token.declinedScopes.joined(separator: " ")])
            table.append(["source", token.source.rawValue])
            table.append(["type", token.tokenType])
            if reveal { table.append(["access token", token.token.stringValue() ?? "(not UTF-8)"]) }
            return table.rendered()
        }
        return .ok
    }
}
