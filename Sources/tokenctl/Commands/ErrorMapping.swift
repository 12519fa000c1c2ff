import AuthSession
import TokenStore

/// Maps the errors of the store and the session layer to tokenctl's exit statuses
/// (sysexits) and to a message and a one-line hint for people.
///
/// | status | errors |
/// |---|---|
/// | 65 data | tpmMismatch (sealed by another TPM: no reset suggested), integrityCheckFailed, databaseCorrupt, schemaTampered, migrationFailed, schemaTooNew, dataKeyMissing, dataKeyCorrupt, invalidInput, storeRolledBack, notAStore (another program's database, left unchanged), migrationRequired (a read-only command on a store that needs `tokenctl migrate`); idTokenInvalid |
/// | 69 unavailable | tpmUnavailable, secretServiceUnavailable, key-provider timedOut; notConnectedToInternet, timedOut, serverError, tlsFailure, loopbackUnavailable |
/// | 75 temporary | keyringLocked, databaseBusy, tpmLockedOut (the TPM refuses every PIN until it recovers); rateLimited; the browser sign-in's authorizationFailed (e.g. `access_denied`), stateMismatch, cancelled, browserUnavailable, and its wait for the browser timing out (see `browserSignInFailure`) |
/// | 77 permission | unsafeFileLayout, wrongPassphrase, wrongPIN (the tries left in the message); userChanged (a sign-in of another user, without `--allow-user-change`) |
/// | 78 config | wrongKeyProvider (the store records another key provider: choose it with --passphrase-fd or --key-provider); authorizationMisconfigured; minimumTTLTooLarge (the server's tokens never live as long as asked; known only after the server answered, so not a usage error) |
/// | 1 other | ioError, diskFull, storeClosed, cancelled, and everything else |
///
/// Messages come from the errors themselves, which never hold a secret or an identifier.
enum ErrorMapping {
    /// The cause attached to a store or session error (an errno, an SQLite result, a GLib
    /// error, a transport failure), described without secrets; `nil` when there is none.
    static func cause(of error: any Error) -> String? {
        switch error {
        case let error as TokenStoreError:
            return error.cause.map { "\($0)" }
        case let error as AuthSessionError:
            if case .storage(let storeError)? = error.cause { return cause(of: storeError) }
            return error.cause.map { "\($0)" }
        default:
            return nil
        }
    }

    /// The failure to print for `error`, or `nil` when it is not an error of the store or the session.
    static func failure(for error: any Error) -> CommandFailure? {
        switch error {
        case let error as TokenStoreError: return storeFailure(error)
        case let error as AuthSessionError: return sessionFailure(error)
        default: return nil
        }
    }

    static func exitCode(for code: TokenStoreError.Code) -> ExitCode {
        switch code {
        case .integrityCheckFailed, .databaseCorrupt, .schemaTampered, .migrationFailed, .schemaTooNew, .dataKeyMissing,
            .dataKeyCorrupt, .invalidInput, .storeRolledBack, .notAStore, .migrationRequired, .tpmMismatch:
            return .dataError
        case .secretServiceUnavailable, .timedOut, .tpmUnavailable, .lockSourceUnavailable:
            return .unavailable
        case .keyringLocked, .databaseBusy, .storeLocked, .userPresenceDenied, .tpmLockedOut:
            return .tempFailure
        case .unsafeFileLayout, .wrongPassphrase, .wrongPIN:
            return .noPermission
        case .ioError, .storeClosed, .cancelled, .diskFull:
            return .failure
        // The store is intact; the invocation chose a key provider that cannot hold its key.
        case .wrongKeyProvider:
            return .config
        default:  // a code added after this table
            return .failure
        }
    }

    static func exitCode(for code: AuthSessionError.Code) -> ExitCode {
        switch code {
        case .notConnectedToInternet, .timedOut, .serverError, .tlsFailure, .loopbackUnavailable:
            return .unavailable
        case .rateLimited:
            return .tempFailure
        // The command line is well formed, but the server's access tokens never live as long
        // as asked: a mismatch with the server's configuration, learnt from its answer.
        case .minimumTTLTooLarge:
            return .config
        // The server has no device grant (or another feature the command needs): its configuration.
        case .unsupportedByServer:
            return .config
        // An API refused a freshly renewed token: the audience or the API's trust, configuration.
        case .accessTokenRejected:
            return .config
        // The server refused the sign-in request itself (scope, client, redirect): fix the configuration.
        case .authorizationMisconfigured:
            return .config
        // The browser sign-in ended without a session; the user can try again.
        case .authorizationFailed, .stateMismatch, .cancelled, .browserUnavailable:
            return .tempFailure
        // The server's ID token is not to be trusted: nothing was stored.
        case .idTokenInvalid:
            return .dataError
        // Another user signed in, and replacing the account's user was not allowed: nothing was stored.
        case .userChanged:
            return .noPermission
        case .interactionRequired, .dpopKeyLost, .stepUpRequired, .serverDeclinedScopes, .invalidClient, .invalidRequest,
            .unsupportedTokenType, .invalidGrant, .unexpectedResponse, .insecureConfiguration, .storage:
            return .failure
        default:  // a code added after this table
            return .failure
        }
    }

    static func storeFailure(_ error: TokenStoreError) -> CommandFailure {
        CommandFailure(
            exitCode(for: error.code), "\(error.message) [\(error.code.rawValue)]", hint: hint(for: error))
    }

    static func sessionFailure(_ error: AuthSessionError) -> CommandFailure {
        if error.code == .storage, case .storage(let storeError)? = error.cause {
            return storeFailure(storeError)
        }
        var message = cliMessage(error)
        var details: [String] = []
        if let status = error.httpStatus { details.append("HTTP \(status)") }
        if let oauth = error.oauthError { details.append(oauth) }
        if let granted = error.grantedScopes { details.append("granted: \(granted.joined(separator: " "))") }
        if let declined = error.declinedScopes { details.append("declined: \(declined.joined(separator: " "))") }
        if !details.isEmpty { message += " (" + details.joined(separator: ", ") + ")" }
        return CommandFailure(exitCode(for: error.code), "\(message) [\(error.code.rawValue)]", hint: hint(for: error))
    }

    /// A failure of `login --browser`: as `sessionFailure`, except that the wait for the
    /// browser's redirect running out (a `timedOut` with neither an HTTP status nor a
    /// transport cause, which a request's time-out always has) is 75, not 69.
    static func browserSignInFailure(_ error: AuthSessionError, timeoutSeconds: Int) -> CommandFailure {
        if error.code == .interactionRequired, error.oauthError != nil {
            // The server's login_required (or its kin) to a --prompt none sign-in.
            return CommandFailure(
                exitCode(for: error.code), sessionFailure(error).message,
                hint: "interactionRequired: the server must show the user a page; run 'tokenctl login --browser' "
                    + "without --prompt none")
        }
        guard error.code == .timedOut, error.httpStatus == nil, error.cause == nil else { return sessionFailure(error) }
        return CommandFailure(
            .tempFailure, "\(error.message) [\(error.code.rawValue)]",
            hint: "timedOut: the browser did not come back within \(timeoutSeconds) s; run 'tokenctl login --browser' "
                + "again, with a longer --timeout if needed")
    }

    /// A failure of `login --device`: as `sessionFailure`, except that the code expiring
    /// (`timedOut`: the server's `expired_token` or the code's own lifetime) is 75, as the
    /// browser's wait running out.
    static func deviceSignInFailure(_ error: AuthSessionError) -> CommandFailure {
        switch error.code {
        case .timedOut where error.httpStatus == nil || error.oauthError == "expired_token":
            return CommandFailure(
                .tempFailure, "\(error.message) [\(error.code.rawValue)]",
                hint: "timedOut: nobody approved the code in time; run 'tokenctl login --device' again")
        case .authorizationFailed:
            return CommandFailure(
                .tempFailure, "\(error.message) [\(error.code.rawValue)]",
                hint: "authorizationFailed: the sign-in was declined on the other device; run 'tokenctl login --device' to try again")
        case .unsupportedByServer:
            return CommandFailure(
                exitCode(for: error.code), "\(error.message) [\(error.code.rawValue)]",
                hint: "unsupportedByServer: sign in with 'tokenctl login --browser', or enable the device grant for the client")
        default:
            return sessionFailure(error)
        }
    }

    /// The session layer's message in words for a command-line user: no Swift API advice, and a
    /// refused foreign request told as what it is, not as the user's mistake.
    static func cliMessage(_ error: AuthSessionError) -> String {
        var message = error.message
        switch error.code {
        case .browserUnavailable:
            message = message.replacing(
                "Set $BROWSER, install xdg-utils, or pass a BrowserOpener.", with: "Set $BROWSER to a browser command, or install xdg-utils.")
        case .stateMismatch:
            message = message.replacing(
                "with a wrong or missing state were refused.",
                with: "request(s) that did not belong to this sign-in (another program's, or an old browser tab's) were ignored.")
        default:
            break
        }
        return message
    }

    // MARK: Hints

    static let unlockHint =
        "unlock the keyring: run 'tokenctl unlock' (shows the desktop's unlock prompt) or log in to the desktop session"
    static let secretServiceHint =
        "start a Secret Service in this session, e.g. 'gnome-keyring-daemon --start --components=secrets' "
        + "(DBUS_SESSION_BUS_ADDRESS must name the session bus)"
    static let keyMissingHint =
        "restore the keyring that held the store's data key (or the store file from a backup, if that is what was damaged); "
        + "start over with 'tokenctl reset --yes' only when neither can be restored "
        + "(deletes the stored secrets, keeps the credential-state history)"

    static let rolledBackHint =
        "the store file was restored from an older copy, undoing later logouts: restore the newest copy of the file; "
        + "if there is none, start over with 'tokenctl reset --yes' (deletes the stored secrets, keeps the "
        + "credential-state history); tokens this copy still holds may have been logged out: revoke them at the server"

    /// How to open a store whose key another provider holds, in tokenctl's options.
    static func wrongKeyProviderHint(_ recorded: KeyProviderKind?) -> String {
        guard let advice = recorded?.traits?.tokenctlAdvice else {
            return "open the store with the key provider the message names; do not reset it, nothing is lost"
        }
        return advice + "; do not reset it, nothing is lost"
    }

    private static func hint(for error: TokenStoreError) -> String? {
        // The Secret portal's provider names the portal in its own hint: the Secret Service hints would mislead.
        if let hint = error.hint, hint.contains("org.freedesktop.portal.Secret") { return sentenceToHint(hint) }
        switch error.code {
        case .keyringLocked: return unlockHint
        case .secretServiceUnavailable: return secretServiceHint
        // A store with other key slots says which (and how to open with them) instead of advising reset.
        case .dataKeyMissing:
            if let hint = error.hint, hint.hasPrefix("This store has other key slots") { return sentenceToHint(hint) }
            return keyMissingHint
        case .integrityCheckFailed: return "run 'tokenctl verify' to list every damaged row"
        // A damaged key record says what to do itself (restore the file; never reset: the key is intact).
        case .databaseCorrupt:
            return error.hint.map(sentenceToHint) ?? "run 'tokenctl verify'; restore the store file from a backup if it fails"
        case .notAStore:
            return "check --store, --app-id or \(CommandContext.storeVariable): the file is not a TokenStore store, "
                + "and tokenctl leaves it unchanged"
        case .migrationRequired:
            return "run 'tokenctl migrate' once to bring the store to this tokenctl's schema (the commands that only "
                + "read never migrate)"
        case .schemaTampered:
            return "the file was changed outside TokenStore (a planted trigger, view, table or index); "
                + "restore the store file from a backup"
        case .diskFull: return "free some disk space and try again; nothing was half written"
        case .storeRolledBack: return rolledBackHint
        case .wrongKeyProvider: return wrongKeyProviderHint(error.recordedKeyProvider)
        case .databaseBusy: return "another process holds the store; try again in a moment"
        case .timedOut: return "the Secret Service did not answer in time; check that it is running and not stuck"
        default: return error.hint.map(sentenceToHint)
        }
    }

    private static func hint(for error: AuthSessionError) -> String? {
        switch error.code {
        case .notConnectedToInternet, .timedOut:
            return "check the --domain URL and the network; for a logout, 'tokenctl resume --all' retries later"
        case .rateLimited:
            if let after = error.retryAfter { return "the server asked to wait \(after.components.seconds) s; try again then" }
            return "the server is rate limiting; try again later"
        case .serverError: return "the server failed; try again later"
        case .interactionRequired, .dpopKeyLost: return "sign in again with 'tokenctl login'"
        case .stepUpRequired:
            return "stepUpRequired: the API asks for a stronger or more recent sign-in; "
                + "sign in again with 'tokenctl login --browser' and the API's acr_values and max_age"
        case .accessTokenRejected:
            return "accessTokenRejected: the API refused a renewed token; check --audience and the API's trusted issuer"
        case .minimumTTLTooLarge:
            guard let lifetime = error.tokenLifetime else {
                return "minimumTTLTooLarge: ask for a shorter --min-ttl"
            }
            return "minimumTTLTooLarge: the server's access tokens live \(wholeSeconds(lifetime)) s; "
                + "ask for a shorter --min-ttl"
        case .invalidGrant: return "get a fresh Apple authorization code: each code works once and expires quickly"
        case .invalidClient: return "check --client-id (or \(CommandTable.clientIDVariable))"
        case .authorizationFailed:
            return "authorizationFailed: the sign-in was declined or refused in the browser; "
                + "run 'tokenctl login --browser' to try again"
        case .stateMismatch:
            return "stateMismatch: the browser's answer did not belong to this sign-in; run 'tokenctl login --browser' again"
        case .cancelled: return "cancelled: the sign-in was cancelled; run 'tokenctl login' again"
        case .browserUnavailable:
            return "browserUnavailable: no browser could be started; set BROWSER to a browser command and try again"
        case .loopbackUnavailable:
            return "loopbackUnavailable: every redirect port is in use; free one or pass another --redirect-port "
                + "(registered in the Allowed Callback URLs)"
        case .idTokenInvalid:
            return "idTokenInvalid: nothing was stored; check --domain and --client-id, and the tenant's signing keys"
        case .userChanged:
            return "userChanged: another user signed in than the account's; nothing was stored (see 'tokenctl profile'); "
                + "to replace the account's user, run 'tokenctl login' again with --allow-user-change"
        default: return nil
        }
    }

    /// `duration` rounded to whole seconds.
    private static func wholeSeconds(_ duration: Duration) -> Int {
        Int(duration.timeInterval.rounded())
    }

    /// The store's hints are sentences for developers; a CLI hint starts lower-case without a final period.
    private static func sentenceToHint(_ sentence: String) -> String {
        var text = sentence
        if text.hasSuffix(".") { text.removeLast() }
        guard let first = text.first else { return text }
        return first.lowercased() + text.dropFirst()
    }
}
