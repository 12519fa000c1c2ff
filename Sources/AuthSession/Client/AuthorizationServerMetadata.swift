import FoundationEssentials

/// Where one authorization server's endpoints are and what it supports: from OpenID Connect
/// Discovery 1.0 (`{issuer}/.well-known/openid-configuration`) for a configuration made with
/// `issuer:`, or Auth0's fixed paths for one made with `domain:`.
///
/// Every endpoint is `https`, or plain `http` to a loopback host, under the same rule as the
/// configured domain or issuer (``AuthorizationServerConfiguration``); a document breaking it
/// is refused with ``AuthSessionError/Code/insecureConfiguration``.
public struct AuthorizationServerMetadata: Sendable, Equatable, Codable {
    /// The issuer, exactly as the server names itself (`iss` of its ID tokens).
    public let issuer: String
    /// Where the browser sign-in starts.
    public let authorizationEndpoint: URL
    /// Where codes and refresh tokens are exchanged.
    public let tokenEndpoint: URL
    /// Where refresh tokens are revoked (RFC 7009); `nil`: the server cannot revoke.
    public let revocationEndpoint: URL?
    /// The server's signing keys.
    public let jwksURI: URL
    /// The userinfo endpoint, when the server has one.
    public let userinfoEndpoint: URL?
    /// `scopes_supported`; `nil` when the document does not say.
    public let scopesSupported: [String]?
    /// `code_challenge_methods_supported`; `nil` when the document does not say.
    public let codeChallengeMethodsSupported: [String]?
    /// `authorization_response_iss_parameter_supported` (RFC 9207): the redirect then carries
    /// `iss`, and a sign-in whose redirect lacks it or names another issuer is refused.
    public let authorizationResponseIssParameterSupported: Bool
    /// Whether this document is Auth0's fixed paths (the `domain:` form) rather than a discovered
    /// one. Requests take their parameter names from the configuration's ``ServerDialect``.
    public let isAuth0: Bool
    /// `pushed_authorization_request_endpoint` (RFC 9126), when the server has one.
    public let pushedAuthorizationRequestEndpoint: URL?
    /// `device_authorization_endpoint` (RFC 8628), when the server has one.
    public let deviceAuthorizationEndpoint: URL?
    /// `require_pushed_authorization_requests` (RFC 9126 §5): the server takes authorization
    /// requests only through its PAR endpoint. A browser sign-in pushes its request whenever
    /// the server has a PAR endpoint, so this only makes a document that requires PAR and names
    /// no endpoint an error.
    public let requirePushedAuthorizationRequests: Bool
    /// Where the browser's session at the server is ended: `end_session_endpoint` (OpenID
    /// Connect RP-Initiated Logout 1.0), or Auth0's `/v2/logout`; `nil`: the server has none.
    public let endSessionEndpoint: URL?

    init(
        issuer: String, authorizationEndpoint: URL, tokenEndpoint: URL, revocationEndpoint: URL?, jwksURI: URL,
        userinfoEndpoint: URL?, scopesSupported: [String]?, codeChallengeMethodsSupported: [String]?,
        authorizationResponseIssParameterSupported: Bool, isAuth0: Bool,
        pushedAuthorizationRequestEndpoint: URL? = nil, deviceAuthorizationEndpoint: URL? = nil,
        requirePushedAuthorizationRequests: Bool = false, endSessionEndpoint: URL? = nil
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.jwksURI = jwksURI
        self.userinfoEndpoint = userinfoEndpoint
        self.scopesSupported = scopesSupported
        self.codeChallengeMethodsSupported = codeChallengeMethodsSupported
        self.authorizationResponseIssParameterSupported = authorizationResponseIssParameterSupported
        self.isAuth0 = isAuth0
        self.pushedAuthorizationRequestEndpoint = pushedAuthorizationRequestEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.requirePushedAuthorizationRequests = requirePushedAuthorizationRequests
        self.endSessionEndpoint = endSessionEndpoint
    }

    /// The endpoints a token or a token's proof is redeemed at: token, revocation, PAR and
    /// device authorization. A DPoP proof the app asks for never names one of them.
    var redeemingEndpoints: [URL] {
        [tokenEndpoint] + [revocationEndpoint, pushedAuthorizationRequestEndpoint, deviceAuthorizationEndpoint].compactMap { $0 }
    }

    /// Auth0's fixed endpoints under `domain` (issuer `{domain}/`), as this library always used,
    /// and its device authorization endpoint (`/oauth/device/code`). No PAR: Auth0 offers it
    /// only on some plans, and a tenant without it refuses `/oauth/par`.
    static func auth0(domain: URL) -> AuthorizationServerMetadata {
        func endpoint(_ path: ServerDialect.Auth0Path) -> URL { ServerDialect.auth0Endpoint(path, domain: domain) }
        return AuthorizationServerMetadata(
            issuer: ServerDialect.auth0Issuer(domain: domain), authorizationEndpoint: endpoint(.authorize),
            tokenEndpoint: endpoint(.token), revocationEndpoint: endpoint(.revoke), jwksURI: endpoint(.jwks),
            userinfoEndpoint: endpoint(.userinfo), scopesSupported: nil, codeChallengeMethodsSupported: nil,
            authorizationResponseIssParameterSupported: false, isAuth0: true,
            deviceAuthorizationEndpoint: endpoint(.deviceCode), endSessionEndpoint: endpoint(.logout))
    }

    /// Whether a sign-in should ask for `offline_access`: always at Auth0 and when the document
    /// does not list scopes; otherwise only when `scopes_supported` lists it.
    public var offersOfflineAccess: Bool {
        guard let scopesSupported, !isAuth0 else { return true }
        return scopesSupported.contains("offline_access")
    }

    /// The metadata in a discovery document of `expectedIssuer`, with `revocationFallback`
    /// (from RFC 8414 metadata) used when the document has no `revocation_endpoint`.
    ///
    /// - Throws: ``AuthSessionError/Code/unexpectedResponse`` for a document that is not a JSON
    ///   object or lacks a required endpoint; ``AuthSessionError/Code/insecureConfiguration``
    ///   for an `issuer` that is not exactly `expectedIssuer` (Discovery §4.3) or an endpoint
    ///   that is neither https nor http to loopback.
    static func discovered(
        _ body: [UInt8], expectedIssuer: String, revocationFallback: URL? = nil
    ) throws(AuthSessionError) -> AuthorizationServerMetadata {
        guard let object = Self.object(body) else {
            throw AuthSessionError(.unexpectedResponse, "The discovery document is not a JSON object.")
        }
        guard let issuer = object["issuer"]?.string, Self.issuer(issuer, fits: expectedIssuer) else {
            throw AuthSessionError(
                .insecureConfiguration, "The discovery document names another issuer than the configured one.")
        }
        func url(_ name: String, required: Bool) throws(AuthSessionError) -> URL? {
            guard let text = object[name]?.string else {
                if required { throw AuthSessionError(.unexpectedResponse, "The discovery document has no \(name).") }
                return nil
            }
            guard let url = URL(string: text) else {
                throw AuthSessionError(.unexpectedResponse, "The discovery document's \(name) is not a URL.")
            }
            do {
                try AuthorizationServerConfiguration.validate(domain: url)
            } catch {
                throw AuthSessionError(
                    .insecureConfiguration,
                    "The discovery document's \(name) is not https (or http to a loopback host).")
            }
            return url
        }
        func strings(_ name: String) -> [String]? {
            guard case .array(let values)? = object[name] else { return nil }
            return values.compactMap(\.string)
        }
        // Force-unwraps below: `required: true` either returns a URL or throws.
        let authorization = try url("authorization_endpoint", required: true)!
        let token = try url("token_endpoint", required: true)!
        let jwks = try url("jwks_uri", required: true)!
        let revocation = try url("revocation_endpoint", required: false) ?? revocationFallback
        if let revocationFallback { try AuthorizationServerConfiguration.validateEndpoint(revocationFallback) }
        var issParameter = false
        if case .bool(let value)? = object["authorization_response_iss_parameter_supported"] { issParameter = value }
        var requirePAR = false
        if case .bool(let value)? = object["require_pushed_authorization_requests"] { requirePAR = value }
        let par = try url("pushed_authorization_request_endpoint", required: false)
        if requirePAR, par == nil {
            throw AuthSessionError(
                .unexpectedResponse,
                "The discovery document requires pushed authorization requests and names no pushed_authorization_request_endpoint.")
        }
        return AuthorizationServerMetadata(
            issuer: issuer, authorizationEndpoint: authorization, tokenEndpoint: token,
            revocationEndpoint: revocation, jwksURI: jwks, userinfoEndpoint: try url("userinfo_endpoint", required: false),
            scopesSupported: strings("scopes_supported"), codeChallengeMethodsSupported: strings("code_challenge_methods_supported"),
            authorizationResponseIssParameterSupported: issParameter, isAuth0: false,
            pushedAuthorizationRequestEndpoint: par,
            deviceAuthorizationEndpoint: try url("device_authorization_endpoint", required: false),
            requirePushedAuthorizationRequests: requirePAR,
            endSessionEndpoint: try url("end_session_endpoint", required: false))
    }

    /// Whether the document's `issuer` is the configured one: equal, or (Microsoft Entra) a
    /// template whose `{tenantid}` stands for the segment of the configured issuer that asks
    /// for any tenant — `common`, `organizations` or `consumers` (`…/common/v2.0`): tokens are
    /// then checked against the template with their `tid` put in. A configuration naming one
    /// issuer (a tenant id, any other path) is never widened to every tenant by a document.
    static func issuer(_ documented: String, fits configured: String) -> Bool {
        if documented == configured { return true }
        guard let range = documented.firstRange(of: "{tenantid}") else { return false }
        let prefix = documented[..<range.lowerBound]
        let suffix = documented[range.upperBound...]
        guard configured.hasPrefix(prefix), configured.hasSuffix(suffix),
            configured.count > prefix.count + suffix.count
        else { return false }
        let segment = configured.dropFirst(prefix.count).dropLast(suffix.count)
        return AuthorizationServerConfiguration.multiTenantSegments.contains(String(segment))
    }

    /// The `revocation_endpoint` of an RFC 8414 document of `expectedIssuer`, or `nil` when it
    /// has none, names another issuer or is not JSON.
    static func revocationEndpoint(inAuthorizationServerMetadata body: [UInt8], expectedIssuer: String) -> URL? {
        guard let object = Self.object(body), object["issuer"]?.string == expectedIssuer,
            let text = object["revocation_endpoint"]?.string, let url = URL(string: text),
            (try? AuthorizationServerConfiguration.validateEndpoint(url)) != nil
        else { return nil }
        return url
    }

    private static func object(_ body: [UInt8]) -> [String: JSONValue]? {
        guard body.count <= DiscoveryCache.maximumBodyBytes,
            let value = try? JSONDecoder().decode(JSONValue.self, from: Data(body))
        else { return nil }
        return value.object
    }
}
