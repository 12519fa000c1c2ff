import AuthSession
import FoundationEssentials
import TokenStore

/// `tokenctl login`: signs in through the browser (`--browser`), or exchanges an Apple
/// authorization code read from stdin; stores the refresh token, the user id and the profile.
struct LoginCommand: TokenctlCommand {
    static let browser = OptionSpec.flag("browser", "Sign in through the browser (loopback redirect, PKCE).")
    static let device = OptionSpec.flag(
        "device", "Sign in on another device (RFC 8628): print a code and a URL, wait for the approval.")
    static let connection = OptionSpec.value(
        "connection", "connection", "The Auth0 connection (default: apple); with --browser.")
    static let audience = OptionSpec.value(
        "audience", "api", "The API the access token is for; with --browser or --device.")
    static let redirectPort = OptionSpec.value(
        "redirect-port", "port", repeatable: true, rule: .port,
        "A loopback redirect port, tried in order (default: 53180-53183).")
    static let timeout = OptionSpec.value(
        "timeout", "seconds", rule: .positiveInteger, "The longest wait for the browser (default: 300).")
    static let appleUserID = OptionSpec.value(
        "apple-user-id", "user-id", "The expected Apple user id (default: the ID token's).")
    static let allowUserChange = OptionSpec.flag(
        "allow-user-change", "Let the sign-in replace the account's user with another one (refused by default).")
    static let firstName = OptionSpec.value("first-name", "name", "The first name Apple gave on the first sign-in.")
    static let lastName = OptionSpec.value("last-name", "name", "The last name Apple gave on the first sign-in.")
    static let prompt = OptionSpec.value(
        "prompt", "prompt", rule: .oneOf(SignInPrompt.allCases.map(\.rawValue)),
        "What the server shows (login: credentials even over its session; none: no page at all); with --browser.")
    static let loginHint = OptionSpec.value(
        "login-hint", "identifier", "Who is expected to sign in (an email address), pre-filled by the server; with --browser.")
    static let loginHintFD = OptionSpec.value(
        "login-hint-fd", "fd", rule: .nonNegativeInteger,
        "Read the login hint from this open file descriptor (kept out of the process list); with --browser.")
    static let maxAge = OptionSpec.value(
        "max-age", "seconds", rule: .nonNegativeInteger,
        "The longest time since the user last authenticated (the ID token's auth_time is checked); with --browser.")
    static let acrValues = OptionSpec.value(
        "acr-values", "values", "Space-separated authentication context classes; the ID token's acr must be one; with --browser.")
    static let dpop = OptionSpec.flag(
        "dpop", environment: "TOKENCTL_DPOP",
        "Bind the session to this store's DPoP key (RFC 9449); later commands use the binding by themselves.")

    /// The code is a credential: on the command line every local user could read it.
    static let appleCode = RefusedOption(
        "apple-code", secret: "the authorization code",
        hint: "read from standard input: printf '%s' \"$CODE\" | tokenctl login --account A")

    /// The ports of `http://127.0.0.1:PORT/callback` when no `--redirect-port` is given.
    static let defaultRedirectPorts: [UInt16] = [53180, 53181, 53182, 53183]
    static let defaultTimeoutSeconds = 300

    static let spec = CommandSpec(
        "login",
        abstract: "Sign in through the browser, on another device, or with an Apple authorization code read from stdin.",
        discussion: """
            With --browser, opens the sign-in page in $BROWSER or the desktop's browser (the URL \
            is also printed on stderr) and waits for its redirect to \
            http://127.0.0.1:PORT/callback: add that URL for each port to the Auth0 \
            application's Allowed Callback URLs. The browser is given a one-time \
            http://127.0.0.1:PORT/start/... address that redirects to the sign-in page, so the \
            page's URL is never on a command line; the redirect is taken from this user's \
            programs only.

            --prompt login asks for the user's credentials even when the browser is still \
            signed in at the server (to sign in as someone else); --prompt none shows no page \
            at all and fails (exit 1, interactionRequired) when the server would have to ask \
            the user. --login-hint names who is expected to sign in; it is sent only in the \
            authorization request (pushed with PAR) and never printed, but like every argument \
            it is visible to other local users in the process list: --login-hint-fd N reads \
            it from descriptor N instead (printf '%s' "$EMAIL" | tokenctl login --browser \
            --login-hint-fd 0 ...), which keeps it out of the process list. With --max-age the ID \
            token's auth_time, with --acr-values its acr, is checked (exit 65 and nothing \
            stored when it fails).

            An account that has a user keeps it: a sign-in of another user fails (exit 77) \
            and stores nothing, unless --allow-user-change is given; then the output says the \
            user changed.

            With --device (no browser on this machine: an SSH session, a server), prints on \
            stderr a user code and the URL where to enter it on any device with a browser (and \
            a QR code of the URL when qrencode is on PATH), then waits until the user approves, \
            declines (exit 75) or the code expires (exit 75). The user code is not a secret: it \
            is worthless without the device code, which never leaves tokenctl. The server must \
            offer the device grant (Auth0: /oauth/device/code; by --issuer: its \
            device_authorization_endpoint), else exit 78.

            With --dpop (or TOKENCTL_DPOP=1) the session is DPoP-bound: the sign-in and every \
            later refresh prove the store's DPoP key (made at the first such sign-in, sealed in \
            the store), the tokens are of type DPoP, and a copied refresh token is useless \
            without the key. Later commands need no --dpop.

            Without --browser, reads the Apple authorization code from stdin, never from an \
            argument:

              export TOKENCTL_DOMAIN=https://TENANT.auth0.com TOKENCTL_CLIENT_ID=ID
              printf %s "$CODE" | tokenctl --app-id org.example.notes login --account alice
            """,
        options: [
            ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, ItemOptions.account, browser, device,
            connection, audience, redirectPort, timeout, prompt, loginHint, loginHintFD, maxAge, acrValues,
            appleUserID,
            allowUserChange, firstName, lastName, ServerOptions.scope, dpop,
        ],
        mutuallyExclusive: [[browser.name, device.name], [loginHint.name, loginHintFD.name]],
        refusedOptions: [appleCode])

    /// How the user signs in.
    enum Method: Sendable {
        case browser(
            connection: String, audience: String?, redirectURIs: [URL], timeoutSeconds: Int, choice: BrowserChoice)
        case device(audience: String?)
        case appleCode(appleUserID: String?, fullName: PersonName?)
    }

    /// `--prompt`, `--login-hint`, `--max-age`, `--acr-values` of a browser sign-in.
    struct BrowserChoice: Sendable {
        var prompt: SignInPrompt?
        /// An identifier: never printed.
        var loginHint: String?
        /// `--login-hint-fd`: the descriptor `loginHint` is read from when the command runs.
        var loginHintDescriptor: Int32?
        var maxAge: Duration?
        var acrValues: [String] = []
    }

    /// The options only a browser sign-in takes.
    static let browserOnly = [connection, redirectPort, timeout, prompt, loginHint, loginHintFD, maxAge, acrValues]

    let server: ServerOptions
    let account: String
    let method: Method
    let scopes: [String]
    /// `--allow-user-change`.
    let allowsUserChange: Bool

    init(parsed: ParsedCommand) throws {
        var server = try ServerOptions(parsed)
        // An issuer configuration sends Auth0's connection only when it is given.
        if server.configuration.usesDiscovery { server.configuration.sendsConnection = parsed.value(Self.connection) != nil }
        server.configuration.usesDPoP = parsed.isSet(Self.dpop)
        self.server = server
        account = try parsed.requiredValue(ItemOptions.account)
        allowsUserChange = parsed.isSet(Self.allowUserChange)
        if parsed.isSet(Self.device) {
            for option in [Self.appleUserID, Self.firstName, Self.lastName] where parsed.value(option) != nil {
                throw UsageError(
                    kind: .mutuallyExclusive(options: [Self.device.longSpelling, option.longSpelling]),
                    commandName: parsed.name)
            }
            for option in Self.browserOnly where !parsed.values(option).isEmpty {
                throw UsageError(
                    kind: .requiresOption(option: option.longSpelling, required: Self.browser.longSpelling),
                    commandName: parsed.name)
            }
            method = .device(audience: parsed.value(Self.audience))
            scopes = ServerOptions.scopes(parsed, default: ["openid", "profile", "email"])
        } else if parsed.isSet(Self.browser) {
            for option in [Self.appleUserID, Self.firstName, Self.lastName] where parsed.value(option) != nil {
                throw UsageError(
                    kind: .mutuallyExclusive(options: [Self.browser.longSpelling, option.longSpelling]),
                    commandName: parsed.name)
            }
            // The parser checked each value against its rule.
            let ports = parsed.values(Self.redirectPort).compactMap { UInt16($0) }
            method = .browser(
                connection: parsed.value(Self.connection) ?? "apple", audience: parsed.value(Self.audience),
                redirectURIs: (ports.isEmpty ? Self.defaultRedirectPorts : ports).map {
                    URL(string: "http://127.0.0.1:\($0)/callback")!
                },
                timeoutSeconds: parsed.value(Self.timeout).flatMap(Int.init) ?? Self.defaultTimeoutSeconds,
                choice: try Self.browserChoice(parsed))
            scopes = ServerOptions.scopes(parsed, default: ["openid", "profile", "email"])
        } else {
            for option in Self.browserOnly + [Self.audience] where !parsed.values(option).isEmpty {
                throw UsageError(
                    kind: .requiresOption(option: option.longSpelling, required: Self.browser.longSpelling),
                    commandName: parsed.name)
            }
            let first = parsed.value(Self.firstName)
            let last = parsed.value(Self.lastName)
            var fullName: PersonName?
            if first != nil || last != nil {
                fullName = PersonName(givenName: first, familyName: last)
            }
            method = .appleCode(appleUserID: parsed.value(Self.appleUserID), fullName: fullName)
            scopes = ServerOptions.scopes(parsed, default: ["openid"])
        }
    }

    func run(_ context: CommandContext) async throws -> ExitCode {
        // The code first: an empty stdin is refused before the store is opened (or made).
        var code: SecretBytes?
        if case .appleCode = method { code = try readAppleCode(context) }
        var method = self.method
        if case .browser(let connection, let audience, let redirectURIs, let timeoutSeconds, var choice) = method,
            let fd = choice.loginHintDescriptor
        {
            // Read before the store is opened (or made): a bad descriptor changes nothing.
            choice.loginHint = try SecretInput.loginHint(fileDescriptor: fd)
            method = .browser(
                connection: connection, audience: audience, redirectURIs: redirectURIs, timeoutSeconds: timeoutSeconds,
                choice: choice)
        }
        let session = try server.openSession(context, createStore: true).session
        // The account's user before the sign-in, to say when it changed (--allow-user-change).
        let previousUserID = try? session.store.appleUserID(account: AccountID(account))
        let result: SignInResult
        switch method {
        case .browser(let connection, let audience, let redirectURIs, let timeoutSeconds, let choice):
            result = try await signInThroughBrowser(
                context, session, connection: connection, audience: audience, redirectURIs: redirectURIs,
                timeoutSeconds: timeoutSeconds, choice: choice)
        case .device(let audience):
            result = try await signInOnDevice(context, session, audience: audience)
        case .appleCode(let appleUserID, let fullName):
            // Read above for this method.
            result = try await exchangeAppleCode(session, code: code!, appleUserID: appleUserID, fullName: fullName)
        }
        // The stored user id: the Apple user id, or `sub` itself for another identity.
        let userID = result.profile.userID ?? result.profile.subject
        emit(result, previousUserID: previousUserID.flatMap { $0 == userID ? nil : $0 }, context)
        return .ok
    }

    /// `session.signIn` with `SystemBrowserOpener` (so `$BROWSER` is honoured).
    private func signInThroughBrowser(
        _ context: CommandContext, _ session: TokenSession, connection: String, audience: String?, redirectURIs: [URL],
        timeoutSeconds: Int, choice: BrowserChoice
    ) async throws -> SignInResult {
        let (account, scopes, console, allowsUserChange) = (AccountID(account), scopes, context.console, allowsUserChange)
        let waiting = context.global.quiet || context.json ? nil : "waiting up to \(timeoutSeconds) s for the browser"
        if server.configuration.usesDiscovery, !context.global.quiet, !context.json {
            // Which endpoints discovery found (public URLs of the server, no identifier).
            if let metadata = try? await session.client.metadata() {
                console.writeError(Self.describe(metadata))
            }
        }
        do {
            return try await session.signIn(
                account: account, redirectURIs: redirectURIs, connection: connection, scopes: scopes,
                audience: audience, prompt: choice.prompt, loginHint: choice.loginHint, maxAge: choice.maxAge,
                acrValues: choice.acrValues, timeout: .seconds(timeoutSeconds), browser: SystemBrowserOpener(),
                allowsUserChange: allowsUserChange,
                onAuthorizationURL: { url in
                    // The one-time start address (no state, nonce nor challenge), for this user's browser only.
                    console.writeError("tokenctl: open this URL to sign in: \(url.absoluteString)\n")
                    if let waiting { console.writeError("tokenctl: \(waiting)\n") }
                })
        } catch let error as AuthSessionError {
            throw ErrorMapping.browserSignInFailure(error, timeoutSeconds: timeoutSeconds)
        }
    }

    /// `--prompt`, `--login-hint`, `--max-age` and `--acr-values` (the parser checked the
    /// prompt word and the number).
    /// - Throws: `UsageError` for an `--acr-values` of spaces only.
    static func browserChoice(_ parsed: ParsedCommand) throws(UsageError) -> BrowserChoice {
        var choice = BrowserChoice()
        choice.prompt = parsed.value(prompt).flatMap(SignInPrompt.init(rawValue:))
        choice.loginHint = parsed.value(loginHint)
        choice.loginHintDescriptor = parsed.value(loginHintFD).flatMap { Int32($0) }
        choice.maxAge = parsed.value(maxAge).flatMap(Int.init).map { Duration.seconds($0) }
        if let text = parsed.value(acrValues) {
            choice.acrValues = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard !choice.acrValues.isEmpty else {
                throw UsageError(
                    kind: .invalidValue(
                        option: acrValues.synopsis, environmentVariable: nil,
                        expectation: "expected space-separated acr values"),
                    commandName: parsed.name)
            }
        }
        return choice
    }

    /// The endpoints of a discovery document, one line each, for stderr.
    static func describe(_ metadata: AuthorizationServerMetadata) -> String {
        var text = "tokenctl: issuer \(metadata.issuer)\n"
        text += "tokenctl: authorization endpoint \(metadata.authorizationEndpoint.absoluteString)\n"
        text += "tokenctl: token endpoint \(metadata.tokenEndpoint.absoluteString)\n"
        text += "tokenctl: revocation endpoint "
            + (metadata.revocationEndpoint?.absoluteString ?? "none (logout deletes the tokens here only)") + "\n"
        return text
    }

    /// `session.signInWithApple` with the code read from stdin.
    private func readAppleCode(_ context: CommandContext) throws -> SecretBytes {
        if context.console.standardInputIsTerminal {
            context.console.writeError("tokenctl: reading the Apple authorization code from stdin; end it with Ctrl-D\n")
        }
        return try SecretInput.standardInput(
            "the Apple authorization code", emptyHint: Self.appleCode.hint + " (or sign in with --browser)")
    }

    private func exchangeAppleCode(
        _ session: TokenSession, code: SecretBytes, appleUserID: String?, fullName: PersonName?
    ) async throws -> SignInResult {
        try await session.signInWithApple(
            authorizationCode: code, appleUserID: appleUserID, account: AccountID(account), scopes: scopes,
            fullName: fullName, allowsUserChange: allowsUserChange)
    }

    /// The result; `previousUserID` is the account's user before, when another one signed in.
    private func emit(_ result: SignInResult, previousUserID: String?, _ context: CommandContext) {
        let access = result.accessToken
        let profile = result.profile
        // The user ids are printed because the user signed in and asked for the result; never logged.
        var fields: [String: JSONValue] = [
            "account": .string(account), "service": .string(AccountID.defaultService), "state": "authorized",
            "expiresAt": Format.date(access.expiresAt), "scopes": Format.strings(access.grantedScopes),
            "declinedScopes": Format.strings(result.declinedScopes), "userID": Format.optional(profile.userID),
            "subject": .string(profile.subject),
        ]
        // Only when another user replaced the account's (--allow-user-change): the one before.
        if let previousUserID { fields["previousUserID"] = .string(previousUserID) }
        context.emit(.object(fields)) {
            var table = TextTable(header: nil)
            table.append(["signed in", account])
            table.append(["state", "authorized"])
            table.append(["user id", profile.userID ?? "-"])
            if let previousUserID { table.append(["user changed", "from \(previousUserID)"]) }
            table.append(["access token expires", access.expiresAt.map(Format.date) ?? "unknown"])
            table.append(["scopes", access.grantedScopes.joined(separator: " ")])
            if !result.declinedScopes.isEmpty { table.append(["declined scopes", result.declinedScopes.joined(separator: " ")]) }
            return table.rendered()
        }
    }
}
