import AuthSession
import TokenStore

/// `--domain` (Auth0) or `--issuer` (any OpenID Connect provider), `--client-id` (or
/// `TOKENCTL_DOMAIN`, `TOKENCTL_ISSUER`, `TOKENCTL_CLIENT_ID`): the authorization server a
/// session command talks to, and `--scope`.
struct ServerOptions: Sendable {
    static let domain = OptionSpec.value(
        "domain", "url", environment: CommandTable.domainVariable, rule: .httpURL,
        "The Auth0 tenant's base URL (or give --issuer).")
    static let issuer = OptionSpec.value(
        "issuer", "url", environment: CommandTable.issuerVariable, rule: .httpURL,
        "An OpenID Connect issuer; endpoints by discovery (instead of --domain).")
    static let clientID = OptionSpec.value(
        "client-id", "id", required: true, environment: CommandTable.clientIDVariable, "The OAuth client identifier.")
    static let scope = OptionSpec.value(
        "scope", "scope", repeatable: true, "A scope to request; repeat for several.")

    var configuration: AuthorizationServerConfiguration

    /// - Throws: `UsageError` for a missing option or a URL the session layer refuses (plain
    ///   http to a remote host…).
    init(_ parsed: ParsedCommand) throws {
        let domain = parsed.value(Self.domain)
        let issuer = parsed.value(Self.issuer)
        if domain != nil, issuer != nil {
            throw UsageError(
                kind: .mutuallyExclusive(options: [Self.domain.longSpelling, Self.issuer.longSpelling]),
                commandName: parsed.name)
        }
        guard domain != nil || issuer != nil else {
            throw UsageError(
                kind: .missingOption(
                    option: Self.domain.synopsis,
                    alternatives: "or set \(CommandTable.domainVariable); for another OpenID Connect provider give '\(Self.issuer.synopsis)' "
                        + "or set \(CommandTable.issuerVariable)"),
                commandName: parsed.name)
        }
        let clientID = try parsed.requiredValue(Self.clientID)
        do {
            if let issuer {
                configuration = try AuthorizationServerConfiguration(issuer: issuer, clientID: clientID)
            } else {
                configuration = try AuthorizationServerConfiguration(domain: domain ?? "", clientID: clientID)
            }
        } catch let error as AuthSessionError where error.code == .insecureConfiguration {
            throw UsageError(
                kind: .invalidValue(
                    option: (issuer != nil ? Self.issuer : Self.domain).synopsis, environmentVariable: nil,
                    expectation: "https, or plain http only to a loopback host (\(error.message))"),
                commandName: parsed.name)
        }
    }

    /// Opens the store (creating it when `createStore` is true and it does not exist yet) and a
    /// session on it with this server.
    /// - Throws: `CommandFailure` when the store is missing; `TokenStoreError` from the open.
    func openSession(
        _ context: CommandContext, createStore: Bool = false
    ) throws -> (store: TokenStore, session: TokenSession) {
        let store = try context.openStore(create: createStore)
        return (store, TokenSession(store: store, configuration: configuration, logger: context.logger))
    }

    /// The scopes given with `--scope` (each value may hold several, space-separated), or
    /// `defaults` when none is given.
    static func scopes(_ parsed: ParsedCommand, default defaults: [String]) -> [String] {
        let given = parsed.values(scope).flatMap { $0.split(separator: " ").map(String.init) }
        return given.isEmpty ? defaults : given
    }
}
