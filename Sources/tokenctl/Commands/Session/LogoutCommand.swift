import AuthSession
import FoundationEssentials
import TokenStore

/// `tokenctl logout`: revokes the refresh token, deletes the account's items and records the
/// logout; a revocation that cannot reach the server waits in the outbox (exit 75). With
/// `--browser`, then ends the browser's session at the server.
struct LogoutCommand: TokenctlCommand {
    static let browser = OptionSpec.flag(
        "browser", "Then end the browser's session at the server (its end-session endpoint), so the next sign-in asks.")
    static let redirectPort = OptionSpec.value(
        "redirect-port", "port", repeatable: true, rule: .port,
        "A loopback port for the server's return, tried in order (default: 53180-53183); with --browser.")
    static let timeout = OptionSpec.value(
        "timeout", "seconds", rule: .positiveInteger, "The longest wait for the browser's return (default: 120); with --browser.")
    static let defaultTimeoutSeconds = 120

    static let spec = CommandSpec(
        "logout",
        abstract: "Revoke the refresh token, delete the account's items and record the logout.",
        discussion: """
            When the revocation cannot reach the server, the account is still signed out and \
            the revocation is kept in the outbox for 'tokenctl resume --all'; the exit status is then 75.

            With --browser, after the logout (which never waits on the browser) the browser \
            opens the server's end-session endpoint (by --issuer: the discovery document's \
            end_session_endpoint, with the account's ID token as id_token_hint; Auth0: \
            /v2/logout) through a one-time http://127.0.0.1:PORT/start/... address (printed on \
            stderr, as login prints its own), so the ID token is never on a command line, and tokenctl waits for the server to send it back \
            to http://127.0.0.1:PORT/callback (register it as a post-logout redirect URI; Auth0: \
            an Allowed Logout URL). The output's browser session is ended, \
            browserSessionNotEnded (the server has none: the next sign-in may go through without \
            a page; use 'login --browser --prompt login') or failed; none changes the exit status.
            """,
        options: [
            ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, ItemOptions.account, browser,
            redirectPort, timeout,
        ])

    let server: ServerOptions
    let account: String
    /// `--browser`: the return addresses and the wait, in seconds.
    let endBrowserSession: (redirectURIs: [URL], timeoutSeconds: Int)?

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
        if parsed.isSet(Self.browser) {
            // The parser checked each value against its rule.
            let ports = parsed.values(Self.redirectPort).compactMap { UInt16($0) }
            endBrowserSession = (
                (ports.isEmpty ? LoginCommand.defaultRedirectPorts : ports).map { URL(string: "http://127.0.0.1:\($0)/callback")! },
                parsed.value(Self.timeout).flatMap(Int.init) ?? Self.defaultTimeoutSeconds
            )
        } else {
            for option in [Self.redirectPort, Self.timeout] where !parsed.values(option).isEmpty {
                throw UsageError(
                    kind: .requiresOption(option: option.longSpelling, required: Self.browser.longSpelling),
                    commandName: parsed.name)
            }
            endBrowserSession = nil
        }
    }

    func run(_ context: CommandContext) async throws -> ExitCode {
        let (store, session) = try server.openSession(context)
        let account = AccountID(account)
        let browserSession: BrowserSessionOutcome
        let outcome: LogoutOutcome
        if let (redirectURIs, timeoutSeconds) = endBrowserSession {
            let browser = AnnouncingBrowserOpener(
                console: context.console,
                waiting: context.global.quiet || context.json ? nil : "waiting up to \(timeoutSeconds) s for the browser")
            let result = try await session.logout(
                account: account, endBrowserSession: true, redirectURIs: redirectURIs, timeout: .seconds(timeoutSeconds),
                browser: browser)
            (outcome, browserSession) = (result.logout, result.browserSession)
        } else {
            outcome = try await session.logout(account: account)
            browserSession = .notAsked
        }
        return try report(outcome, browserSession: browserSession, store: store, context)
    }

    /// The outcome on stdout (and a warning on stderr with --json when the logout is not done).
    private func report(
        _ outcome: LogoutOutcome, browserSession: BrowserSessionOutcome, store: TokenStore, _ context: CommandContext
    ) throws -> ExitCode {
        let pending = try store.ledger.pendingRevocationList().entries.filter { $0.account == AccountID(self.account) }.count

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
        var fields: [String: JSONValue] = [
            "account": .string(account), "outcome": .string(name), "failureCode": Format.optional(failureCode),
            "pendingRevocations": .int(pending),
        ]
        // Only with --browser: what happened to the browser's session at the server.
        var browserLine = ""
        switch browserSession {
        case .notAsked: break
        case .ended:
            fields["browserSession"] = "ended"
            browserLine = "browser session ended at the server: the next sign-in asks who signs in.\n"
        case .browserSessionNotEnded:
            fields["browserSession"] = "browserSessionNotEnded"
            browserLine = "browserSessionNotEnded: the server has no end-session endpoint; the browser stays signed in "
                + "there (sign in with 'login --browser --prompt login' to choose the user).\n"
        case .failed(let code):
            fields["browserSession"] = "failed"
            fields["browserSessionFailureCode"] = .string(code.rawValue)
            browserLine = "The browser session at the server was not ended (\(code.rawValue)); the logout stands.\n"
        }
        context.emit(.object(fields)) { "\(name)\n\(explanation)\n" + browserLine }
        if status != .ok, context.json {
            context.console.writeError("tokenctl: warning: \(explanation)\n")
        }
        return status
    }
}

/// The system browser (`$BROWSER` honoured), after the one-time start address is on stderr, as
/// `login --browser` prints its own: a user whose browser did not come up opens it by hand. The
/// address redirects once to the end-session URL; it holds neither the ID token nor the state.
struct AnnouncingBrowserOpener: BrowserOpener {
    let console: Console
    let waiting: String?

    func open(_ url: URL) async throws {
        console.writeError("tokenctl: open this URL to end the browser session: \(url.absoluteString)\n")
        if let waiting { console.writeError("tokenctl: \(waiting)\n") }
        try await SystemBrowserOpener().open(url)
    }
}
