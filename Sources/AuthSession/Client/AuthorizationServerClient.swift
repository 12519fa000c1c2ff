import FoundationEssentials
import TokenStore

/// The one HTTP path of the module to the authorization server (an Auth0 tenant):
/// the Apple authorization-code exchange, refresh-token renewal and revocation, each
/// form-encoded, each under the ``RetryPolicy``.
///
/// ```swift
/// let client = AuthorizationServerClient(
///     configuration: try AuthorizationServerConfiguration(
///         domain: "https://tenant.auth0.com", clientID: "abc123"),
///     logger: logger)
/// let tokens = try await client.exchangeAppleAuthorizationCode(code, scopes: ["openid", "offline_access"])
/// ```
///
/// Log lines (info and debug only) carry the endpoint, attempt, HTTP status, delay and
/// outcome; never a token, a body or an identifier.
public struct AuthorizationServerClient: Sendable {
    /// The validated configuration.
    public let configuration: AuthorizationServerConfiguration
    /// The transport every request goes through.
    public let transport: any HTTPTransport
    /// The retry policy every call follows.
    public let retryPolicy: RetryPolicy
    /// The logger (``TokenStore/TokenStoreLogger/disabled`` by default).
    public let logger: TokenStoreLogger
    /// The server's endpoints, resolved before the first request that needs them.
    let discovery: DiscoveryCache
    /// The DPoP key and nonces every token request proves with (none: Bearer tokens).
    package let dpop: DPoPBinding?

    /// The grant type of Auth0's native Apple sign-in token exchange.
    static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// The subject token type of an Apple authorization code at Auth0.
    static let appleAuthorizationCodeTokenType = "http://auth0.com/oauth/token-type/apple-authz-code"

    /// A client. The configuration was validated when it was made, so no request can go to a
    /// non-loopback `http://` host.
    public init(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport = CurlTransport(),
        retryPolicy: RetryPolicy = .default, logger: TokenStoreLogger = .disabled
    ) {
        self.init(
            configuration: configuration, transport: transport, retryPolicy: retryPolicy, logger: logger,
            discovery: DiscoveryCache(configuration: configuration, transport: transport, store: nil, logger: logger),
            dpop: nil)
    }

    private init(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport, retryPolicy: RetryPolicy,
        logger: TokenStoreLogger, discovery: DiscoveryCache, dpop: DPoPBinding?
    ) {
        self.configuration = configuration
        self.transport = transport
        self.retryPolicy = retryPolicy
        self.logger = logger
        self.discovery = discovery
        self.dpop = dpop
    }

    /// This client proving every token request with `binding` (RFC 9449): a `DPoP` header on
    /// the code exchanges and refreshes (not on revocation), one retry on `use_dpop_nonce`.
    package func withDPoP(_ binding: DPoPBinding?) -> AuthorizationServerClient {
        AuthorizationServerClient(
            configuration: configuration, transport: transport, retryPolicy: retryPolicy, logger: logger,
            discovery: discovery, dpop: binding)
    }

    /// This client with one attempt per call: the policy's caps, clock and discovery cache kept, no retry.
    var withoutRetries: AuthorizationServerClient {
        var policy = retryPolicy
        policy.maximumAttempts = 1
        return AuthorizationServerClient(
            configuration: configuration, transport: transport, retryPolicy: policy, logger: logger, discovery: discovery,
            dpop: dpop)
    }

    /// This client keeping its discovery document sealed in `store` too, so that a new process
    /// does not fetch it again; unchanged when it already keeps one.
    func keepingDiscovery(in store: TokenStore) -> AuthorizationServerClient {
        guard configuration.usesDiscovery, discovery.store == nil else { return self }
        return AuthorizationServerClient(
            configuration: configuration, transport: transport, retryPolicy: retryPolicy, logger: logger,
            discovery: DiscoveryCache(configuration: configuration, transport: transport, store: store, logger: logger),
            dpop: dpop)
    }

    /// The server's endpoints and capabilities: Auth0's fixed paths for a `domain:`
    /// configuration; for an `issuer:` one, its discovery document (cached; fetched when
    /// older than ``AuthorizationServerConfiguration/discoveryLifetime``; a stale one when offline).
    /// - Throws: ``AuthSessionError`` — `insecureConfiguration` (the document names another
    ///   issuer, or an endpoint is not https), `notConnectedToInternet`, `timedOut`,
    ///   `serverError`, `unexpectedResponse`, … when nothing usable is cached.
    public func metadata() async throws -> AuthorizationServerMetadata {
        try await discovery.metadata()
    }

    /// Exchanges an Apple authorization code for Auth0 tokens (`POST /oauth/token`,
    /// `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`).
    ///
    /// The answer's granted scopes are in ``TokenResponse/grantedScopes``; compare them with
    /// ``TokenResponse/declinedScopes(requested:)``.
    /// - Throws: ``AuthSessionError`` — `invalidGrant` (bad, expired or used code),
    ///   `invalidClient`, `invalidRequest`, `notConnectedToInternet`, `timedOut`,
    ///   `rateLimited`, `serverError`, `tlsFailure`, `cancelled`, `unexpectedResponse`.
    /// - Parameter userProfile: Auth0's `user_profile` JSON of a first sign-in
    ///   (`{"name":{"firstName":…,"lastName":…}}`: Apple gives the name to the app once).
    public func exchangeAppleAuthorizationCode(
        _ code: SecretBytes, scopes: [String], userProfile: String? = nil
    ) async throws -> TokenResponse {
        var form: [(String, FormValue)] = [
            ("grant_type", .text(Self.tokenExchangeGrantType)),
            ("subject_token_type", .text(Self.appleAuthorizationCodeTokenType)),
            ("subject_token", .secret(code)),
            ("client_id", .text(configuration.clientID)),
        ]
        if !scopes.isEmpty { form.append(("scope", .text(scopes.joined(separator: " ")))) }
        // Auth0's own grant: the API goes under Auth0's name whatever the configuration's form.
        if let audience = configuration.audience { form.append((ServerDialect.auth0.apiParameterName, .text(audience))) }
        if let userProfile { form.append(("user_profile", .secret(SecretBytes(utf8: userProfile)))) }
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        return try await requestTokens(form: form, endpoint: .tokenExchange, scopes: scopes)
    }

    /// Exchanges the authorization code of a browser sign-in for tokens (`POST /oauth/token`,
    /// `grant_type=authorization_code`, RFC 6749 §4.1.3 with the PKCE `code_verifier` of
    /// RFC 7636). `redirectURI` must be the one of the authorization request, byte for byte.
    ///
    /// A code works once: this call is never retried after the request may have reached the
    /// server (a second try would be refused `invalid_grant`, hiding the first answer).
    /// - Throws: ``AuthSessionError`` — `invalidGrant` (bad, expired or used code, or a PKCE
    ///   mismatch), `invalidClient`, `invalidRequest`, `notConnectedToInternet`, `timedOut`,
    ///   `rateLimited`, `serverError`, `tlsFailure`, `cancelled`, `unexpectedResponse`.
    public func exchangeAuthorizationCode(
        _ code: SecretBytes, codeVerifier: SecretBytes, redirectURI: URL, scopes: [String] = []
    ) async throws -> TokenResponse {
        var form: [(String, FormValue)] = [
            ("grant_type", .text("authorization_code")),
            ("client_id", .text(configuration.clientID)),
            ("code", .secret(code)),
            ("code_verifier", .secret(codeVerifier)),
            ("redirect_uri", .text(redirectURI.absoluteString)),
        ]
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        return try await withoutRetries.requestTokens(form: form, endpoint: .authorizationCode, scopes: scopes)
    }

    /// Renews tokens with a refresh token (`POST /oauth/token`, `grant_type=refresh_token`).
    ///
    /// When the answer carries a new refresh token (rotation) the old one is retired at the
    /// server: store the new one before using the access token.
    /// - Throws: ``AuthSessionError`` — `interactionRequired` for `invalid_grant` (the OAuth
    ///   error is kept), `invalidClient`, `invalidRequest`, `notConnectedToInternet`,
    ///   `timedOut`, `rateLimited`, `serverError`, `tlsFailure`, `cancelled`,
    ///   `unexpectedResponse`.
    /// - Parameter audience: the API the new access token is for (Auth0's Multi-Resource
    ///   Refresh Token: one refresh token, access tokens for the APIs its policy lists).
    public func refresh(_ refreshToken: SecretBytes, scopes: [String], audience: String? = nil) async throws -> TokenResponse {
        try await refresh(refreshToken, scopes: scopes, audience: audience, boundTo: nil)
    }

    /// ``refresh(_:scopes:audience:)`` of a refresh token bound to `endpoints` (sent there and
    /// nowhere else, see ``endpoints(boundTo:)``); `nil`: the server's current endpoints.
    func refresh(
        _ refreshToken: SecretBytes, scopes: [String], audience: String?, boundTo endpoints: ServerEndpoints?
    ) async throws -> TokenResponse {
        var form: [(String, FormValue)] = [
            ("grant_type", .text("refresh_token")),
            ("client_id", .text(configuration.clientID)),
            ("refresh_token", .secret(refreshToken)),
        ]
        if !scopes.isEmpty { form.append(("scope", .text(scopes.joined(separator: " ")))) }
        if let audience, !audience.isEmpty { form.append((configuration.dialect.apiParameterName, .text(audience))) }
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        return try await requestTokens(form: form, endpoint: .refresh, scopes: scopes, boundTo: endpoints)
    }

    /// Revokes a refresh token (`POST /oauth/revoke`, RFC 7009, `token_type_hint=refresh_token`).
    ///
    /// Never throws: 200 is ``RevocationResult/revoked`` (also for an unknown token, whatever
    /// the body); transient failures after the policy gave up are
    /// ``RevocationResult/retryLater(_:)``; configuration errors are
    /// ``RevocationResult/failedPermanently(_:)``.
    public func revoke(_ refreshToken: SecretBytes) async -> RevocationResult {
        await revoke(refreshToken, boundTo: nil)
    }

    /// ``revoke(_:)`` of a refresh token bound to `endpoints`: revoked where it was issued
    /// (see ``endpoints(boundTo:)``); `nil`: at the server's current revocation endpoint.
    func revoke(_ refreshToken: SecretBytes, boundTo endpoints: ServerEndpoints?) async -> RevocationResult {
        var form: [(String, FormValue)] = [
            ("client_id", .text(configuration.clientID)),
            ("token", .secret(refreshToken)),
            ("token_type_hint", .text("refresh_token")),
        ]
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        let (responseClass, _, _) = await perform(form: form, endpoint: .revoke, boundTo: endpoints)
        let result = ResponseClassifier.revocationResult(for: responseClass, retryAfterCap: retryPolicy.maximumRetryAfter)
        var metadata = ["revoke.outcome": result.outcome, "oauth.endpoint": "revoke"]
        if let error = result.error { metadata["error.code"] = error.code.rawValue }
        logger.info("Revocation finished.", metadata: metadata)
        return result
    }

    // MARK: - Implementation

    func requestTokens(
        form: [(String, FormValue)], endpoint: Endpoint, scopes: [String], boundTo endpoints: ServerEndpoints? = nil
    ) async throws -> TokenResponse {
        let (responseClass, response, servedBy) = await perform(
            form: configuration.dialect.adding(to: form), endpoint: endpoint, boundTo: endpoints)
        switch responseClass {
        case .success:
            guard let response else {
                throw AuthSessionError(.unexpectedResponse, "No answer was kept for a successful request.")
            }
            do {
                var tokens = try ResponseClassifier.decodeTokenResponse(
                    status: response.status, headers: response.headers, body: response.body, endpoint: endpoint,
                    requestedScopes: scopes, receivedAt: retryPolicy.clock.wallClock())
                tokens.servedBy = servedBy
                logger.info(
                    "Token request succeeded.",
                    metadata: [
                        "oauth.endpoint": endpoint.rawValue, "http.status": "\(response.status)",
                        "token.rotated": tokens.refreshToken == nil ? "false" : "true",
                        "scopes.granted": "\(tokens.grantedScopes.count)",
                    ])
                return tokens
            } catch {
                logger.info(
                    "Token answer could not be read.",
                    metadata: ["oauth.endpoint": endpoint.rawValue, "error.code": error.code.rawValue])
                throw error
            }
        case .retryable(var error, let serverDelay):
            if let serverDelay { error.retryAfter = retryPolicy.capped(serverDelay: serverDelay) }
            throw error
        case .permanent(let error):
            throw error
        }
    }

    /// Sends the form to the endpoint under the retry policy, at the endpoints a token is bound
    /// to (`nil`: the server's current ones); returns the final class, on success the answer, and
    /// the endpoints the request went to.
    private func perform(
        form: [(String, FormValue)], endpoint: Endpoint, boundTo bound: ServerEndpoints?
    ) async -> (ResponseClass, HTTPResponse?, ServerEndpoints?) {
        let endpoints: ServerEndpoints
        do {
            endpoints = try await self.endpoints(boundTo: bound)
        } catch {
            return error.isTransient ? (.retryable(error, serverDelay: nil), nil, nil) : (.permanent(error), nil, nil)
        }
        let target = endpoint == .revoke ? endpoints.revocation : endpoints.token
        guard let target else {
            return (.permanent(AuthSessionError(.notRevocable, "The server has no revocation endpoint.")), nil, endpoints)
        }
        guard let url = URL(string: target), (try? AuthorizationServerConfiguration.validateEndpoint(url)) != nil else {
            return (.permanent(AuthSessionError(.insecureConfiguration, "A recorded server endpoint is not valid.")), nil, endpoints)
        }
        let (responseClass, response) = await send(form: form, endpoint: endpoint, to: url)
        return (responseClass, response, endpoints)
    }

    /// Sends the form to `url` under the retry policy; returns the final class and, on success, the answer.
    func send(form: [(String, FormValue)], endpoint: Endpoint, to url: URL) async -> (ResponseClass, HTTPResponse?) {
        var headers = HTTPHeaders()
        headers["Content-Type"] = FormEncoding.contentType
        headers["Accept"] = "application/json"
        headers["Cache-Control"] = "no-store"
        var request = HTTPRequest(
            method: "POST", url: url, headers: headers, body: FormEncoding.encode(form),
            timeout: configuration.requestTimeout)
        // Revocation carries no proof; the device authorization request names the key in `dpop_jkt`.
        let dpop = endpoint == .revoke || endpoint == .deviceAuthorization ? nil : self.dpop
        let clock = retryPolicy.clock
        let start = clock.now()
        var attempt = 0
        var nonceRetried = false
        while true {
            attempt += 1
            if Task.isCancelled {
                return (.permanent(AuthSessionError(.cancelled, "The request was cancelled.")), nil)
            }
            if let dpop {
                do {
                    request.headers["DPoP"] = try await dpop.sharedProof(method: "POST", url: url)  // a fresh jti each attempt
                } catch {
                    return (.permanent(AuthSessionError(.unexpectedResponse, "The DPoP proof could not be made.")), nil)
                }
            }
            let responseClass: ResponseClass
            var received: HTTPResponse?
            do {
                let response = try await transport.send(request)
                received = response
                if let dpop, let nonce = response.headers["DPoP-Nonce"], !nonce.isEmpty {
                    await dpop.recordShared(nonce: nonce, for: url)
                }
                if dpop != nil, DPoPNonceAnswer.asksForNonce(response) {
                    if !nonceRetried {
                        // RFC 9449 8: once, at once, with the nonce the answer carried; not a policy attempt.
                        nonceRetried = true
                        attempt -= 1
                        logger.info("Retrying with the server's DPoP nonce.", metadata: ["oauth.endpoint": endpoint.rawValue])
                        continue
                    }
                    logger.info("The server asked for a new DPoP nonce twice in a row.", metadata: ["oauth.endpoint": endpoint.rawValue])
                    return (
                        .permanent(
                            AuthSessionError(.invalidRequest, "The server asked for a new DPoP nonce twice in a row (use_dpop_nonce).")),
                        response
                    )
                }
                nonceRetried = false
                responseClass = ResponseClassifier.classify(
                    status: response.status, headers: response.headers, body: response.body, endpoint: endpoint,
                    now: clock.wallClock())
                logger.debug(
                    "Answer received.",
                    metadata: [
                        "oauth.endpoint": endpoint.rawValue, "attempt": "\(attempt)", "http.status": "\(response.status)",
                        "class": responseClass.name,
                    ])
            } catch let failure as TransportFailure {
                responseClass = ResponseClassifier.classify(failure)
                logger.debug(
                    "Request failed in transport.",
                    metadata: [
                        "oauth.endpoint": endpoint.rawValue, "attempt": "\(attempt)",
                        "transport.failure": failure.kind.rawValue,
                    ])
            } catch is CancellationError {
                responseClass = .permanent(AuthSessionError(.cancelled, "The request was cancelled."))
            } catch {
                responseClass = .permanent(
                    AuthSessionError(
                        .unexpectedResponse, "The transport failed with \(type(of: error)).",
                        cause: .other(String(describing: type(of: error)))))
            }

            guard case .retryable(var error, let serverDelay) = responseClass else {
                return (responseClass, received)
            }
            let elapsed = clock.now() - start
            switch retryPolicy.decision(afterAttempt: attempt, serverDelay: serverDelay, elapsed: elapsed) {
            case .giveUp(let retryAfter):
                error.retryAfter = retryAfter
                logger.info(
                    "Giving up after retryable failures.",
                    metadata: [
                        "oauth.endpoint": endpoint.rawValue, "attempt": "\(attempt)", "error.code": error.code.rawValue,
                        "retry.after_ms": retryAfter.map { "\($0.wholeMilliseconds)" } ?? "none",
                    ])
                return (.retryable(error, serverDelay: serverDelay), received)
            case .retry(let delay):
                logger.info(
                    "Retrying after a retryable failure.",
                    metadata: [
                        "oauth.endpoint": endpoint.rawValue, "attempt": "\(attempt)", "error.code": error.code.rawValue,
                        "retry.delay_ms": "\(delay.wholeMilliseconds)",
                    ])
                do {
                    try await clock.sleep(delay)
                } catch {
                    return (.permanent(AuthSessionError(.cancelled, "The request was cancelled while waiting to retry.")), nil)
                }
            }
        }
    }
}
