import FoundationEssentials
import TokenStore

/// What a logout asked to end the browser's session at the provider did there.
public enum BrowserSessionOutcome: Sendable, Equatable, CustomStringConvertible {
    /// Not asked (`endBrowserSession: false`).
    case notAsked
    /// The provider ended its session and sent the browser back to the loopback listener
    /// (with the `state` sent, for OpenID Connect).
    case ended
    /// The provider has no end-session endpoint (no `end_session_endpoint` in its discovery
    /// document): its browser session stays signed in, and a sign-in may go through without a
    /// page; ask for ``SignInPrompt/login`` then.
    case browserSessionNotEnded
    /// The attempt failed — no browser (`browserUnavailable`), no free port
    /// (`loopbackUnavailable`), no return within the time-out (`timedOut`), cancelled
    /// (`cancelled`), the server's document not reachable: the code. The logout itself stands.
    case failed(AuthSessionError.Code)

    public var description: String {
        switch self {
        case .notAsked: return "notAsked"
        case .ended: return "ended"
        case .browserSessionNotEnded: return "browserSessionNotEnded"
        case .failed(let code): return "failed(\(code.rawValue))"
        }
    }
}

/// The outcome of ``TokenSession/logout(account:endBrowserSession:redirectURIs:timeout:browser:)``.
public struct BrowserLogoutOutcome: Sendable, Equatable, CustomStringConvertible {
    /// The revocation and the local delete, as ``TokenSession/logout(account:)`` answers.
    public let logout: LogoutOutcome
    /// What happened to the browser's session at the provider.
    public let browserSession: BrowserSessionOutcome

    public var description: String { "\(logout), browser session \(browserSession)" }
}

extension TokenSession {
    /// Logs `account` out as ``logout(account:)`` does — the revocation, the local delete and
    /// the credential state first, never waiting on a browser — and then, when
    /// `endBrowserSession`, ends the browser's session at the provider so that the next
    /// sign-in asks who signs in:
    ///
    /// - OpenID Connect (RP-Initiated Logout 1.0): the browser opens the discovery document's
    ///   `end_session_endpoint` with `client_id`, the account's ID token as `id_token_hint`
    ///   (read before the delete), `post_logout_redirect_uri` (the loopback listener, at the
    ///   first free port of `redirectURIs`: register it at the provider as a post-logout
    ///   redirect URI) and a fresh `state`, which the return must carry.
    /// - Auth0 (the `domain:` form): `/v2/logout` with `client_id` and `returnTo` (the
    ///   listener's address with the `state` in its query; Auth0 sends no `state` of its own:
    ///   register the address as an Allowed Logout URL).
    ///
    /// As for a sign-in, the browser is given the listener's one-time
    /// `http://127.0.0.1:PORT/start/<id>` address, which redirects once to the end-session
    /// URL: the ID token is never on a command line, nor in a log line.
    ///
    /// - Returns: the logout's outcome and ``BrowserSessionOutcome``:
    ///   ``BrowserSessionOutcome/browserSessionNotEnded`` for a provider without an
    ///   end-session endpoint, ``BrowserSessionOutcome/failed(_:)`` when the browser part
    ///   failed (not an error: the logout stands).
    /// - Throws: what ``logout(account:)`` throws; nothing from the browser part.
    public func logout(
        account: AccountID, endBrowserSession: Bool, redirectURIs: [URL], timeout: Duration = .seconds(120),
        browser: any BrowserOpener = SystemBrowserOpener()
    ) async throws -> BrowserLogoutOutcome {
        // The ID token first: the logout deletes it.
        var idToken: SecretBytes?
        if endBrowserSession {
            let (store, key) = (self.store, ItemKey(account: account, kind: .idToken))
            idToken = (try? await StoreWork.blocking { try store.secret(for: key) }) ?? nil
        }
        let outcome = try await logout(account: account)
        guard endBrowserSession else { return BrowserLogoutOutcome(logout: outcome, browserSession: .notAsked) }
        return BrowserLogoutOutcome(
            logout: outcome,
            browserSession: await endBrowserSessionAtProvider(
                idToken: idToken, redirectURIs: redirectURIs, timeout: timeout, browser: browser))
    }

    /// Opens the provider's end-session endpoint and waits for the browser's return.
    private func endBrowserSessionAtProvider(
        idToken: SecretBytes?, redirectURIs: [URL], timeout: Duration, browser: any BrowserOpener
    ) async -> BrowserSessionOutcome {
        let metadata: AuthorizationServerMetadata
        do {
            metadata = try await client.metadata()
        } catch {
            return .failed((error as? AuthSessionError)?.code ?? .unexpectedResponse)
        }
        guard let endpoint = metadata.endSessionEndpoint else {
            logger.info("The server has no end-session endpoint: its browser session stays signed in.")
            return .browserSessionNotEnded
        }
        let state = SignInRandom.token()
        let listener: LoopbackRedirectListener
        do {
            listener = try LoopbackRedirectListener.bind(
                redirectURIs: redirectURIs, expectedState: state, endsSession: true, logger: logger)
        } catch {
            return .failed(error.code)
        }
        let clientID = client.configuration.clientID
        var query: [(String, FormValue)] = [("client_id", .text(clientID))]
        if client.configuration.dialect.family == .auth0 {
            query.append(("returnTo", .text(listener.redirectURI.absoluteString + "?state=" + state)))
        } else {
            if let idToken { query.append(("id_token_hint", .secret(idToken))) }
            query.append(("post_logout_redirect_uri", .text(listener.redirectURI.absoluteString)))
            query.append(("state", .text(state)))
        }
        let start = listener.startURL(for: Self.url(endpoint, query))
        do {
            try await browser.open(start)
            try Task.checkCancellation()
            _ = try await listener.waitForCallback(timeout: timeout)
            logger.info("The browser session at the server was ended.")
            return .ended
        } catch {
            listener.close()
            if error is CancellationError { return .failed(.cancelled) }
            return .failed((error as? AuthSessionError)?.code ?? .unexpectedResponse)
        }
    }
}
