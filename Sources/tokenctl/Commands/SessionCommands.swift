import AuthSession
import Foundation
import TokenStore

/// `login`, `token`, `logout`, `resume`: driving the session layer against an authorization
/// server (`--domain`, `--client-id`, or `TOKENCTL_DOMAIN` / `TOKENCTL_CLIENT_ID`).
enum SessionCommands {
    // MARK: login

    static func login(_ context: CommandContext) throws -> ExitCode {
        let configuration = try context.serverConfiguration()
        guard let account = context.command.value("account"), let code = context.command.value("apple-code"),
            let userID = context.command.value("apple-user-id")
        else {
            throw UsageError(kind: .missingOption(option: "--account <account>"), commandName: context.command.name)
        }
        let scopes = requestedScopes(context, default: ["openid"])
        let store = try context.openStore(create: true)
        let session = TokenSession(store: store, configuration: configuration)
        let authorizationCode = SecretBytes(utf8: code)
        let result = try waitFor {
            try await session.signInWithApple(
                authorizationCode: authorizationCode, appleUserID: userID, account: account, scopes: scopes)
        }
        let access = result.accessToken
        let document: JSONValue = [
            "account": .string(account), "service": .string(ItemKey.defaultService), "state": "authorized",
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

    // MARK: token

    static func token(_ context: CommandContext) throws -> ExitCode {
        let configuration = try context.serverConfiguration()
        guard let account = context.command.value("account") else {
            throw UsageError(kind: .missingOption(option: "--account <account>"), commandName: context.command.name)
        }
        let scopes = requestedScopes(context, default: [])
        let store = try context.openStore()
        let session = TokenSession(store: store, configuration: configuration)
        let token = try waitFor { try await session.acquireTokenSilently(account: account, scopes: scopes) }
        let reveal = context.command.hasFlag("reveal")
        var document: [String: JSONValue] = [
            "account": .string(account), "expiresAt": .string(Format.date(token.expiresAt)),
            "scopes": Format.strings(token.scopes), "source": .string(token.source.rawValue),
        ]
        if reveal {
            RevealWarning.emitIfNeeded(on: context.console)
            // The token becomes a String only here, at the edge, because the user asked for it.
            document["accessToken"] = Format.optional(token.token.stringValue())
        }
        context.emit(.object(document)) {
            var table = TextTable(header: nil)
            table.append(["account", account])
            table.append(["expires", Format.date(token.expiresAt)])
            table.append(["scopes", token.scopes.joined(separator: " ")])
            table.append(["source", token.source.rawValue])
            if reveal { table.append(["access token", token.token.stringValue() ?? "(not UTF-8)"]) }
            return table.rendered()
        }
        return .ok
    }

    // MARK: logout

    static func logout(_ context: CommandContext) throws -> ExitCode {
        let configuration = try context.serverConfiguration()
        guard let account = context.command.value("account") else {
            throw UsageError(kind: .missingOption(option: "--account <account>"), commandName: context.command.name)
        }
        let store = try context.openStore()
        let session = TokenSession(store: store, configuration: configuration)
        let outcome = try waitFor { try await session.logout(account: account) }
        let pending = try store.pendingRevocations().filter { $0.service == ItemKey.defaultService && $0.account == account }.count

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
        case .revocationPending:
            (name, status) = ("revocationPending", .tempFailure)
            explanation = "Logged out here, but the server could not be reached: the refresh token waits in the "
                + "outbox. Run 'tokenctl resume' when the server is reachable."
        case .revocationFailed(let code):
            (name, status) = ("revocationFailed", .failure)
            failureCode = code.rawValue
            explanation = "Logged out here, but the server refused the revocation for good (\(code.rawValue)): a "
                + "configuration error. The token stays in the outbox, flagged; see 'tokenctl pending'."
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

    // MARK: resume

    static func resume(_ context: CommandContext) throws -> ExitCode {
        let configuration = try context.serverConfiguration()
        let store = try context.openStore()
        let session = TokenSession(store: store, configuration: configuration)
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

    // MARK: Arguments

    private static func requestedScopes(_ context: CommandContext, default defaults: [String]) -> [String] {
        let given = context.command.allValues("scope").flatMap { $0.split(separator: " ").map(String.init) }
        return given.isEmpty ? defaults : given
    }
}
