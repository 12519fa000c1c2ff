import AuthSession
import TokenStore

/// `tokenctl login`: exchanges an Apple authorization code; stores the refresh token and user id.
struct LoginCommand: TokenctlCommand {
    static let appleCode = OptionSpec.value(
        "apple-code", "code", required: true, "The authorization code from Sign in with Apple.")

    static let appleUserID = OptionSpec.value(
        "apple-user-id", "user-id", required: true, "The user identifier from Sign in with Apple.")

    static let spec = CommandSpec(
        "login",
        abstract: "Exchange an Apple authorization code; store the refresh token and user id.",
        options: [
            ServerOptions.domain, ServerOptions.clientID, ItemOptions.account, appleCode, appleUserID,
            ServerOptions.scope,
        ])

    let server: ServerOptions
    let account: String
    let authorizationCode: SecretBytes
    let appleUserID: String
    let scopes: [String]

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
        authorizationCode = SecretBytes(utf8: try parsed.requiredValue(Self.appleCode))
        appleUserID = try parsed.requiredValue(Self.appleUserID)
        scopes = ServerOptions.scopes(parsed, default: ["openid"])
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let session = try server.openSession(context, createStore: true).session
        let result = try waitFor {
            try await session.signInWithApple(
                authorizationCode: authorizationCode, appleUserID: appleUserID, account: AccountID(account), scopes: scopes)
        }
        let access = result.accessToken
        let document: JSONValue = [
            "account": .string(account), "service": .string(AccountID.defaultService), "state": "authorized",
            "expiresAt": .string(Format.date(access.expiresAt)), "scopes": Format.strings(access.scopes),
            "declinedScopes": Format.strings(result.declinedScopes),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["signed in", account])
            table.append(["state", "authorized"])
            table.append(["access token expires", Format.date(access.expiresAt)])
            table.append(["scopes", access.scopes.joined(separator: " ")])
            if !result.declinedScopes.isEmpty { table.append(["declined scopes", result.declinedScopes.joined(separator: " ")]) }
            return table.rendered()
        }
        return .ok
    }
}
