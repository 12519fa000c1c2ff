import FoundationEssentials
import TokenStore

extension TokenSession {
    // MARK: Requests to the app's API (RFC 6750 3, RFC 9449 7 and 9, RFC 9470, RFC 9728)

    /// Sends `request` to the app's own API with `account`'s access token and answers the API's
    /// challenges (`WWW-Authenticate`, read with ``AuthenticationChallenge``) the way they ask:
    ///
    /// - `Authorization: Bearer <token>`, or for a DPoP-bound session `Authorization: DPoP
    ///   <token>` with a proof (``dpopProof(method:url:accessToken:)``) in `DPoP`; any
    ///   `Authorization` or `DPoP` field of `request` is replaced. The token is the one
    ///   ``accessToken(for:audience:scopes:minimumTTL:requiringScopes:forceRefresh:)`` gives.
    /// - `invalid_token` (401): exactly one forced renewal and one retry. Refused again:
    ///   ``AuthSessionError/Code/accessTokenRejected`` (never a loop).
    /// - DPoP `use_dpop_nonce` with a `DPoP-Nonce`: the nonce is kept
    ///   (``recordDPoPNonce(_:for:)``) and the request retried once with a new proof. A nonce the
    ///   API sends on any other answer is kept as well.
    /// - `insufficient_user_authentication` (RFC 9470): ``AuthSessionError/Code/stepUpRequired``
    ///   with the API's `acr_values` and `max_age` (``AuthSessionError/requiredACRValues``,
    ///   ``AuthSessionError/requiredMaxAge``): sign the user in with them, then call again.
    /// - `resource_metadata` (RFC 9728): the API's protected resource metadata is fetched once
    ///   (https, or http to loopback; 64 KiB at most), its `resource` must be the API requested,
    ///   and the configured issuer one of its `authorization_servers`; another authorization
    ///   server is refused with ``AuthSessionError/Code/issuerMismatch``, never followed.
    ///
    /// Any other answer, a 2xx, another 4xx, a 5xx included, is returned as it is: the API's
    /// own errors are the app's to read. Redirects are not followed. At most four requests.
    ///
    /// ```swift
    /// let answer = try await session.authorizedRequest(
    ///     HTTPRequest(method: "GET", url: URL(string: "https://api.example.com/notes")!), account: "me")
    /// ```
    ///
    /// - Parameters:
    ///   - request: the API request (`https`, or `http` to a loopback host).
    ///   - audience, scopes: which cached token, as for ``accessToken(for:audience:scopes:minimumTTL:requiringScopes:forceRefresh:)``.
    /// - Throws: ``AuthSessionError`` — `stepUpRequired`, `accessTokenRejected`, `issuerMismatch`,
    ///   `insecureConfiguration` (a request or metadata URL that is not https or loopback http, or
    ///   carries credentials), `unexpectedResponse` (a `WWW-Authenticate` over 16 KiB, metadata
    ///   that is not for this API), `interactionRequired`, `dpopKeyLost`, the network codes (the
    ///   API unreachable: `notConnectedToInternet`, `timedOut`, `tlsFailure`), `cancelled`, `storage`.
    public func authorizedRequest(
        _ request: HTTPRequest, account: AccountID, audience: String? = nil, scopes: [String] = []
    ) async throws -> HTTPResponse {
        try Self.checkAPIURL(request.url)
        var token = try await accessToken(for: account, audience: audience, scopes: scopes)
        var renewed = false
        var nonceRetried = false
        var checkedMetadata: Set<String> = []
        while true {
            let response = try await sendToAPI(request, token: token)
            let isDPoP = token.tokenType == "DPoP"
            let nonce = response.headers["DPoP-Nonce"].flatMap { Self.isDPoPNonce($0) ? $0 : nil }
            if isDPoP, let nonce { try await recordDPoPNonce(nonce, for: request.url) }
            guard response.status == 401 || response.status == 403 else { return response }
            let challenges = try AuthenticationChallenge.parse(response)
            let oauthChallenges = challenges.filter { $0.isBearer || $0.isDPoP }
            if let metadataURL = oauthChallenges.lazy.compactMap(\.resourceMetadata).first,
                checkedMetadata.insert(metadataURL.absoluteString).inserted
            {
                _ = try await ProtectedResourceMetadata.fetchAndCheck(
                    metadataURL, requestURL: request.url, issuer: client.configuration.issuer, transport: client.transport,
                    timeout: client.configuration.requestTimeout)
            }
            let scheme = isDPoP ? "DPoP" : "Bearer"
            let challenge =
                oauthChallenges.first { $0.hasScheme(scheme) && $0.error != nil }
                ?? oauthChallenges.first { $0.error != nil }
            switch challenge?.error {
            case "use_dpop_nonce" where isDPoP && nonce != nil && !nonceRetried:
                nonceRetried = true
                logger.debug("the API asked for a DPoP nonce; retrying once")
            case "invalid_token":
                guard !renewed else {
                    throw AuthSessionError(
                        .accessTokenRejected,
                        "The API refused the access token again after a renewal (invalid_token): the token is not for "
                            + "this API (audience, scopes) or the API does not trust this authorization server.",
                        httpStatus: response.status, oauthError: "invalid_token")
                }
                renewed = true
                logger.info("the API refused the access token; renewing once")
                token = try await renew(account: account, audience: audience, scopes: scopes)
            case "insufficient_user_authentication":
                throw AuthSessionError.stepUpRequired(
                    acrValues: challenge?.acrValues ?? [], maxAge: challenge?.maxAge, httpStatus: response.status)
            default:
                return response
            }
        }
    }

    /// One request to the API with `token` (and a fresh proof for a DPoP token); a transport
    /// failure as the API's (not the authorization server's) network error.
    private func sendToAPI(_ request: HTTPRequest, token: AccessToken) async throws -> HTTPResponse {
        var request = request
        request.headers["Authorization"] = token.authorizationHeaderValue()
        request.headers["DPoP"] = nil
        if token.tokenType == "DPoP" {
            request.headers["DPoP"] = try await dpopProof(method: request.method, url: request.url, accessToken: token)
        }
        do {
            return try await client.transport.send(request)
        } catch let failure as TransportFailure {
            throw Self.apiError(failure)
        } catch is CancellationError {
            throw AuthSessionError(.cancelled, "The API request was cancelled.")
        }
    }

    private static func apiError(_ failure: TransportFailure) -> AuthSessionError {
        switch failure.kind {
        case .notConnected:
            return AuthSessionError(.notConnectedToInternet, "The API could not be reached.", cause: .transport(failure))
        case .timedOut:
            return AuthSessionError(.timedOut, "The API request timed out.", cause: .transport(failure))
        case .tls:
            return AuthSessionError(.tlsFailure, "The TLS connection to the API failed.", cause: .transport(failure))
        case .cancelled:
            return AuthSessionError(.cancelled, "The API request was cancelled.", cause: .transport(failure))
        case .other:
            return AuthSessionError(.unexpectedResponse, "The API request failed without a usable answer.", cause: .transport(failure))
        }
    }

    /// An API URL a token may be sent to: `https` with a host, or `http` to a loopback host;
    /// no user name or password.
    private static func checkAPIURL(_ url: URL) throws {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil,
            scheme == "https" || (scheme == "http" && AuthorizationServerConfiguration.isLoopback(host: host))
        else {
            throw AuthSessionError(
                .insecureConfiguration,
                "An access token is sent only to an https:// API with a host (http:// only to a loopback host), "
                    + "without a user name or password. Nothing was sent.")
        }
    }
}
