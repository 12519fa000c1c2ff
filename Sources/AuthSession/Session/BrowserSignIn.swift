import FoundationEssentials
import TokenStore

extension TokenSession {
    /// Signs in through the user's browser: Auth0's hosted login with PKCE and a loopback
    /// redirect (RFC 8252), the way a Linux desktop app can sign a user in with Apple.
    ///
    /// 1. Binds a listener on `127.0.0.1` at the first of `redirectURIs` whose port is free
    ///    (Auth0 matches callback URLs exactly, port included: register each one as an
    ///    Allowed Callback URL).
    /// 2. Opens `{domain}/authorize` with `response_type=code`, a PKCE S256 challenge, a
    ///    fresh `state` and `nonce`, `connection`, the scopes and `audience` in the browser.
    ///    When the server has a pushed authorization request endpoint (RFC 9126, in its
    ///    discovery document), those parameters are POSTed there first (with a DPoP proof when
    ///    the sign-in is bound) and the browser gets only `client_id` and the `request_uri`.
    /// 3. Waits for the redirect (at most `timeout`), exchanges its code with the PKCE
    ///    verifier, validates the ID token (signature by the tenant's JWKS, `iss`, `aud`,
    ///    `exp`, `nonce`, …) and takes the Apple user id from its `sub` (`apple|<id>`).
    /// 4. Stores the refresh token, the access token, the ID token, the user id and the
    ///    profile (name and email, which Apple sends on the first sign-in only) in one
    ///    durable transaction and records the user `authorized`. A sign-in over a live
    ///    session queues the old refresh token for revocation, as ``signInWithApple(authorizationCode:appleUserID:account:scopes:fullName:allowsUserChange:)`` does.
    ///
    /// ```swift
    /// let result = try await session.signIn(
    ///     account: "me", redirectURIs: [URL(string: "http://127.0.0.1:53180/callback")!],
    ///     onAuthorizationURL: { url in print("If no browser opened, open:", url) })
    /// print(result.profile.userID ?? "not an Apple user")
    /// ```
    ///
    /// - Parameters:
    ///   - redirectURIs: `http://127.0.0.1:PORT/path` URLs, tried in order; port 0 takes
    ///     any free port (for servers that allow any loopback port; Auth0 does not).
    ///   - connection: the Auth0 connection (`apple`); `nil` shows the tenant's login page.
    ///     Sent only when ``AuthorizationServerConfiguration/sendsConnection`` (the `domain:` form).
    ///   - scopes: `openid` and `offline_access` are always added.
    ///   - audience: the API the access token is for (Auth0 returns a JWT access token then);
    ///     `nil` uses the configuration's ``AuthorizationServerConfiguration/audience``.
    ///   - prompt: `prompt`: ``SignInPrompt/login`` to ask for credentials even over a live browser
    ///     session (to sign in as someone else), ``SignInPrompt/selectAccount``,
    ///     ``SignInPrompt/consent``, or ``SignInPrompt/none`` (no page at all: the server's
    ///     `login_required` and its kin throw ``AuthSessionError/Code/interactionRequired``).
    ///   - loginHint: `login_hint`: who is expected to sign in (an email address, a user name),
    ///     which the server may pre-fill. An identifier: it travels only in the authorization
    ///     request (with PAR, in the pushed request, never in the browser's URL), and is never
    ///     logged nor put in an error.
    ///   - maxAge: `max_age`: the longest time since the user last authenticated; the ID token's
    ///     `auth_time` must then be present and no older than that plus the leeway (60 s),
    ///     else `idTokenInvalid` (``IDTokenCheck/authenticationTime``).
    ///   - acrValues: `acr_values`: the authentication context classes asked for, most wanted
    ///     first; the ID token's `acr` must then be one of them, else `idTokenInvalid`
    ///     (``IDTokenCheck/authenticationContext``).
    ///   - timeout: the longest wait for the browser's redirect (5 minutes by default).
    ///   - browser: how the URL is opened (``SystemBrowserOpener`` by default).
    ///   - allowsUserChange: whether `account`, when it already has a user, may be signed in
    ///     as another one (its previous user is then recorded `revoked`). `false` (the
    ///     default): another user's sign-in throws ``AuthSessionError/Code/userChanged``,
    ///     stores nothing and revokes the refresh token it got.
    ///   - usesDPoP: whether this sign-in binds the session to the store's DPoP key (RFC 9449);
    ///     `nil` (the default): ``AuthorizationServerConfiguration/usesDPoP``.
    ///   - onAuthorizationURL: called before the browser opens with the address the browser
    ///     is given, so that the app can show it for the user to open by hand: the listener's
    ///     one-time `http://127.0.0.1:PORT/start/<id>`, which redirects once, and only for
    ///     this user, to the authorization URL. Safe to show (it holds no `state`, `nonce`
    ///     nor PKCE challenge), but it is a one-time credential of the attempt: do not log it.
    ///
    /// The authorization URL itself is never given to the browser opener nor to any
    /// command line (every local user can read another's `/proc/PID/cmdline`): the opener,
    /// ``SystemBrowserOpener`` or the app's, gets the start address. The listener serves only
    /// connections of this user (see ``LoopbackRedirectListener``).
    /// - Throws: ``AuthSessionError`` — `authorizationFailed` (the server's `error=`, such as
    ///   `access_denied` when the user declined), `authorizationMisconfigured` (the server refused
    ///   the pushed authorization request), `timedOut`, `stateMismatch`, `cancelled`,
    ///   `loopbackUnavailable`, `browserUnavailable`, `interactionRequired` (`prompt: .none` and the
    ///   server must show a page), `invalidRequest` (a negative `maxAge`, an empty `loginHint`, an acr
    ///   value with a space), `idTokenInvalid` (the failed check in
    ///   ``AuthSessionError/idTokenCheck``), `userChanged`, `invalidGrant`, `insecureConfiguration` (a
    ///   redirect URI that is not `http://127.0.0.1:PORT/path`), the network codes, `storage`.
    ///   Nothing is stored when it throws.
    @discardableResult
    public func signIn(
        account: AccountID, redirectURIs: [URL], connection: String? = "apple",
        scopes: [String] = ["openid", "profile", "email"], audience: String? = nil, prompt: SignInPrompt? = nil,
        loginHint: String? = nil, maxAge: Duration? = nil, acrValues: [String] = [], timeout: Duration = .seconds(300),
        browser: any BrowserOpener = SystemBrowserOpener(), allowsUserChange: Bool = false, usesDPoP: Bool? = nil,
        onAuthorizationURL: @Sendable (URL) -> Void = { _ in }
    ) async throws -> SignInResult {
        try StoreWork.run { try SessionLedger.validateSignIn(account: account, appleUserID: nil) }
        let authentication = try AuthenticationRequest(
            prompt: prompt, loginHint: loginHint, maxAge: maxAge, acrValues: acrValues)
        let metadata = try await client.metadata()
        func attempt(_ metadata: AuthorizationServerMetadata) async throws -> SignInResult {
            try await signIn(
                account: account, redirectURIs: redirectURIs, connection: connection, scopes: scopes, audience: audience,
                authentication: authentication, timeout: timeout, browser: browser, allowsUserChange: allowsUserChange,
                usesDPoP: usesDPoP, metadata: metadata, onAuthorizationURL: onAuthorizationURL)
        }
        do {
            return try await attempt(metadata)
        } catch let error as AuthSessionError where error.oauthError == "invalid_scope" && client.configuration.usesDiscovery {
            // The server refused the scopes a kept copy of its document said it offers (it stopped
            // offering offline_access, say): the copy is out of date. Fetched again once; when the
            // server's scopes changed, the sign-in is tried once more with them.
            guard let fresh = try? await client.discovery.fetched().metadata, fresh.scopesSupported != metadata.scopesSupported
            else { throw error }
            logger.info("The server refused scopes its kept document offered; signing in again with its current document.")
            return try await attempt(fresh)
        }
    }

    /// One browser sign-in with the server's `metadata` (see the public form).
    private func signIn(
        account: AccountID, redirectURIs: [URL], connection: String?, scopes: [String], audience: String?,
        authentication: AuthenticationRequest, timeout: Duration, browser: any BrowserOpener, allowsUserChange: Bool,
        usesDPoP: Bool?, metadata: AuthorizationServerMetadata, onAuthorizationURL: @Sendable (URL) -> Void
    ) async throws -> SignInResult {
        let audience = audience ?? client.configuration.audience
        let deadline = ContinuousClock.now + timeout
        let secrets = SignInSecrets()
        let requested = Self.withRequiredScopes(
            scopes, offlineAccess: client.configuration.dialect.asksOfflineAccess(metadata))
        let dpop = try await signInBinding(usesDPoP: usesDPoP)
        let listener = try LoopbackRedirectListener.bind(
            redirectURIs: redirectURIs, expectedState: secrets.state, logger: logger)
        let callback: AuthorizationCallback
        do {
            let parameters = authorizationParameters(
                redirectURI: listener.redirectURI, secrets: secrets, scopes: requested, connection: connection,
                audience: audience, authentication: authentication, metadata: metadata, dpopThumbprint: dpop?.key.thumbprint)
            var url = Self.url(metadata.authorizationEndpoint, parameters)
            if let par = metadata.pushedAuthorizationRequestEndpoint {
                // RFC 9126: the parameters go to the server directly; the browser gets client_id + request_uri.
                let pushed = try await client.withDPoP(dpop).pushAuthorizationRequest(parameters, to: par)
                url = Self.url(
                    metadata.authorizationEndpoint,
                    [("client_id", .text(client.configuration.clientID)), ("request_uri", .text(pushed.requestURI))])
            }
            let start = listener.startURL(for: url)
            onAuthorizationURL(start)
            try await browser.open(start)
            try Task.checkCancellation()
            callback = try await listener.waitForCallback(timeout: max(.zero, deadline - ContinuousClock.now))
        } catch is CancellationError {
            listener.close()
            throw AuthSessionError(.cancelled, "The sign-in was cancelled.")
        } catch {
            listener.close()
            throw AuthenticationRequest.interactionError(Self.configurationError(error))
        }
        try Self.checkIssuer(callback, metadata: metadata)
        let response = try await client.withDPoP(dpop).exchangeAuthorizationCode(
            callback.code, codeVerifier: secrets.pkce.verifier, redirectURI: callback.redirectURI, scopes: requested)
        return try await completeSignIn(
            response, requested: requested, audience: audience, account: account, nonce: secrets.nonce,
            maxAge: authentication.maxAge, acrValues: authentication.acrValues, expectedAppleUserID: nil,
            allowsUserChange: allowsUserChange, dpop: dpop)
    }

    /// `{domain}/authorize?response_type=code&…` for one attempt.
    func authorizationURL(
        redirectURI: URL, secrets: SignInSecrets, scopes: [String], connection: String?, audience: String?,
        authentication: AuthenticationRequest? = nil, metadata: AuthorizationServerMetadata? = nil,
        dpopThumbprint: String? = nil
    ) -> URL {
        let metadata = metadata ?? .auth0(domain: client.configuration.domain)
        return Self.url(
            metadata.authorizationEndpoint,
            authorizationParameters(
                redirectURI: redirectURI, secrets: secrets, scopes: scopes, connection: connection, audience: audience,
                authentication: authentication, metadata: metadata, dpopThumbprint: dpopThumbprint))
    }

    /// The authorization request's parameters (in the URL, or pushed to the PAR endpoint).
    func authorizationParameters(
        redirectURI: URL, secrets: SignInSecrets, scopes: [String], connection: String?, audience: String?,
        authentication: AuthenticationRequest?, metadata: AuthorizationServerMetadata, dpopThumbprint: String?
    ) -> [(String, FormValue)] {
        var query: [(String, FormValue)] = [
            ("response_type", .text("code")),
            ("client_id", .text(client.configuration.clientID)),
            ("redirect_uri", .text(redirectURI.absoluteString)),
            ("scope", .text(scopes.joined(separator: " "))),
            ("state", .text(secrets.state)),
            ("nonce", .text(secrets.nonce)),
            ("code_challenge", .text(secrets.pkce.challenge)),
            ("code_challenge_method", .text(PKCE.method)),
        ]
        let dialect = client.configuration.dialect
        if let name = dialect.connectionParameterName, let connection, !connection.isEmpty { query.append((name, .text(connection))) }
        if let audience, !audience.isEmpty { query.append((dialect.apiParameterName, .text(audience))) }
        // prompt, login_hint, max_age, acr_values (the hint only here: in the URL, or pushed with PAR).
        query += authentication?.parameters ?? []
        // RFC 9449 10: the code is bound to the key that will redeem it.
        if let dpopThumbprint { query.append(("dpop_jkt", .text(dpopThumbprint))) }
        return dialect.adding(to: query)
    }

    /// `endpoint?query`, percent-encoded.
    static func url(_ endpoint: URL, _ query: [(String, FormValue)]) -> URL {
        // Form encoding writes a space as `+` (a `+` itself as `%2B`); a URL query says `%20`.
        let encoded = String(decoding: FormEncoding.encode(query), as: UTF8.self).replacing("+", with: "%20")
        // The endpoint was validated with the configuration, and the query is percent-encoded.
        return URL(string: endpoint.absoluteString + "?" + encoded)!
    }
}

extension LoopbackRedirectListener {
    /// A listener at the first of `redirectURIs` whose port is free, in order.
    ///
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` for an empty list or a URI
    ///   that is not `http://127.0.0.1:PORT/path` (no query, fragment or user);
    ///   ``AuthSessionError/Code/loopbackUnavailable`` when every port is in use.
    static func bind(
        redirectURIs: [URL], expectedState: String, endsSession: Bool = false, logger: TokenStoreLogger
    ) throws(AuthSessionError) -> LoopbackRedirectListener
    {
        guard !redirectURIs.isEmpty else {
            throw AuthSessionError(.insecureConfiguration, "No loopback redirect URI is configured for the sign-in.")
        }
        // Consecutive URIs with the same path share one listener attempt over their ports.
        var groups: [(path: String, ports: [UInt16])] = []
        for uri in redirectURIs {
            let (port, path) = try loopbackParts(uri)
            if let last = groups.last, last.path == path {
                groups[groups.count - 1].ports.append(port)
            } else {
                groups.append((path, [port]))
            }
        }
        var lastError: AuthSessionError?
        for group in groups {
            do {
                return try LoopbackRedirectListener(
                    ports: group.ports, expectedState: expectedState, callbackPath: group.path, endsSession: endsSession,
                    logger: logger)
            } catch where error.code == .loopbackUnavailable {
                lastError = error
            }
        }
        // At least one group was tried.
        throw lastError!
    }

    /// The port and path of a loopback redirect URI, or `insecureConfiguration`.
    private static func loopbackParts(_ uri: URL) throws(AuthSessionError) -> (UInt16, String) {
        guard let components = URLComponents(url: uri, resolvingAgainstBaseURL: false),
            components.scheme?.lowercased() == "http", components.host == "127.0.0.1",
            let port = components.port, (0...65535).contains(port),
            components.user == nil, components.password == nil, components.query == nil, components.fragment == nil,
            components.percentEncodedPath.hasPrefix("/")
        else {
            throw AuthSessionError(
                .insecureConfiguration,
                "A sign-in redirect URI must be http://127.0.0.1:PORT/path (RFC 8252 loopback, IPv4 literal, explicit "
                    + "port, no query or fragment).")
        }
        return (UInt16(port), components.percentEncodedPath)
    }
}
