import FoundationEssentials
import TokenStore

/// Where the authorization server is and who the app is to it.
///
/// Validated when made: `https://` for any host; plain `http://` only for a loopback host
/// (exactly `localhost`, an IP literal in `127.0.0.0/8`, or `::1`; `localhost.` is refused),
/// for tests and local development. Anything else
/// throws ``AuthSessionError/Code/insecureConfiguration`` before any request is made.
///
/// Two forms: `domain:` for an Auth0 tenant (issuer `{domain}/`, Auth0's paths, `audience=`),
/// and `issuer:` for any OpenID Connect provider, whose endpoints are read from its discovery
/// document (``AuthorizationServerMetadata``) before the first request that needs them.
///
/// ```swift
/// let auth0 = try AuthorizationServerConfiguration(
///     domain: URL(string: "https://tenant.auth0.com")!, clientID: "abc123")
/// let keycloak = try AuthorizationServerConfiguration(
///     issuer: URL(string: "https://id.example.com/realms/staff")!, clientID: "desktop")
/// ```
public struct AuthorizationServerConfiguration: Sendable {
    /// The tenant's base URL, such as `https://tenant.auth0.com`; for the `issuer:` form, the issuer URL.
    public let domain: URL
    /// The issuer ID tokens must name, compared exactly: `{domain}/` for the `domain:` form, the
    /// configured URL as given (no slash added or removed) for the `issuer:` form.
    public private(set) var issuer: String
    /// How this server is spoken to (Auth0's paths and parameter names, or OpenID Connect
    /// Discovery's), decided by the form the configuration was made with.
    public private(set) var dialect: ServerDialect
    /// Whether endpoints come from OpenID Connect Discovery (`issuer:` form) rather than Auth0's
    /// paths: ``ServerDialect/usesDiscovery``.
    public var usesDiscovery: Bool { dialect.usesDiscovery }
    /// Other spellings of the issuer an ID token may carry, accepted only because the app says so
    /// (Google's `accounts.google.com` for `https://accounts.google.com`). Empty by default.
    public var acceptedIssuerAliases: [String] = []
    /// The tenants whose ID tokens a multi-tenant issuer (Microsoft Entra's `…/common/v2.0`,
    /// `…/organizations/v2.0`, `…/consumers/v2.0`, whose document names `{tenantid}`) accepts,
    /// by their `tid`; `nil` (the default): any tenant. Not used for any other issuer.
    public var acceptedTenants: [String]?
    /// How long a fetched discovery document is used before it is fetched again (24 hours). A
    /// stale document is still used when the server cannot be reached.
    public var discoveryLifetime: Duration = .seconds(24 * 3600)
    /// Whether a sign-in asks for `offline_access`: `nil` (default) asks when the server's
    /// `scopes_supported` lists it (always for Auth0 and for a document without the list).
    /// The dialect's ``ServerDialect/requestsOfflineAccess``.
    public var requestsOfflineAccess: Bool? {
        get { dialect.requestsOfflineAccess }
        set { dialect.requestsOfflineAccess = newValue }
    }
    /// Whether a browser sign-in sends its `connection` (Auth0's parameter): `true` for the
    /// `domain:` form, `false` for the `issuer:` form unless the app sets it (an Auth0 tenant
    /// configured by its issuer). The dialect's ``ServerDialect/sendsConnection``.
    public var sendsConnection: Bool {
        get { dialect.sendsConnection }
        set { dialect.sendsConnection = newValue }
    }
    /// The application's client id.
    public let clientID: String
    /// The client secret of a confidential client, or `nil` for a public (native) client.
    public let clientSecret: SecretBytes?
    /// The bound of one request (connect, send, receive the full answer).
    public var requestTimeout: Duration
    /// The API access tokens are for when a call names none (Auth0's `audience`); `nil`: the
    /// tenant's default (an opaque token for `/userinfo` unless the tenant sets a default audience).
    public var audience: String?
    /// Whether sign-ins bind the session to the store's DPoP key (RFC 9449; Auth0 calls it
    /// sender-constraining): the authorize request carries `dpop_jkt`, every token request a
    /// proof, and the tokens come back `DPoP`. An account signed in so keeps its binding by
    /// itself in every later process, whatever this says. Off by default.
    public var usesDPoP = false

    /// A validated configuration.
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` for a URL that is not
    ///   `https` (or `http` to loopback), has no host, carries credentials, a query or a
    ///   fragment, or for an empty client id or a non-positive timeout.
    public init(
        domain: URL, clientID: String, clientSecret: SecretBytes? = nil, requestTimeout: Duration = .seconds(30),
        audience: String? = nil
    ) throws {
        try self.init(
            base: domain, issuer: ServerDialect.auth0Issuer(domain: domain), dialect: .auth0, clientID: clientID,
            clientSecret: clientSecret, requestTimeout: requestTimeout, audience: audience)
    }

    /// The one initializer every form goes through: each stored property is set here, so a new
    /// one cannot be left out of a form.
    private init(
        base: URL, issuer: String, dialect: ServerDialect, clientID: String, clientSecret: SecretBytes?,
        requestTimeout: Duration, audience: String?
    ) throws {
        try Self.validate(domain: base)
        guard !clientID.isEmpty, clientID.utf8.count <= 512 else {
            throw AuthSessionError(.insecureConfiguration, "The client id is empty or longer than 512 bytes.")
        }
        guard requestTimeout > .zero else {
            throw AuthSessionError(.insecureConfiguration, "The request timeout must be positive.")
        }
        self.domain = base
        self.issuer = issuer
        self.dialect = dialect
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.requestTimeout = requestTimeout
        self.audience = (audience?.isEmpty ?? true) ? nil : audience
    }

    /// A validated configuration for any OpenID Connect provider, by its issuer, such as
    /// `https://id.example.com/realms/staff` or `https://tenant.okta.com/oauth2/default`.
    ///
    /// The endpoints come from `{issuer}/.well-known/openid-configuration` (fetched before the
    /// first request, cached for ``discoveryLifetime``), whose `issuer` must equal `issuer`
    /// exactly. `audience`, if given, is sent as RFC 8707 `resource=`.
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` as the `domain:` form.
    public init(
        issuer: URL, clientID: String, clientSecret: SecretBytes? = nil, requestTimeout: Duration = .seconds(30),
        audience: String? = nil
    ) throws {
        try self.init(
            base: issuer, issuer: issuer.absoluteString, dialect: .openIDConnect, clientID: clientID,
            clientSecret: clientSecret, requestTimeout: requestTimeout, audience: audience)
    }

    /// A validated `issuer:` configuration from a URL string.
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` as the `URL` initializer,
    ///   and for a string that is not a URL.
    public init(
        issuer: String, clientID: String, clientSecret: SecretBytes? = nil, requestTimeout: Duration = .seconds(30),
        audience: String? = nil
    ) throws {
        guard let url = URL(string: issuer) else {
            throw AuthSessionError(.insecureConfiguration, "The issuer is not a valid URL.")
        }
        try self.init(
            issuer: url, clientID: clientID, clientSecret: clientSecret, requestTimeout: requestTimeout, audience: audience)
    }

    /// Replaces the dialect's ``ServerDialect/additionalParameters``: sent on the authorization,
    /// device authorization and token requests after the library's own.
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` for a name in
    ///   ``ServerDialect/reservedParameterNames`` (compared without case: `state`, `redirect_uri`,
    ///   `client_id`, PKCE's, …), an empty name or one outside `A–Z a–z 0–9 - . _ :`, or a name or
    ///   value over 2,048 bytes; the parameters are then unchanged.
    public mutating func setAdditionalParameters(_ parameters: [String: String]) throws {
        try dialect.setAdditionalParameters(parameters)
    }

    /// The path segments of an issuer that stand for any tenant (Microsoft Entra's).
    static let multiTenantSegments: Set<String> = ["common", "organizations", "consumers"]

    /// `{issuer}/.well-known/openid-configuration` (no double slash when the issuer ends in `/`).
    public var discoveryURL: URL { wellKnown("openid-configuration") }
    /// RFC 8414 §3.1's metadata URL: `/.well-known/oauth-authorization-server` inserted between
    /// the issuer's host and its path (whose trailing `/` is dropped):
    /// `https://host/.well-known/oauth-authorization-server/o` for the issuer `https://host/o`.
    public var authorizationServerMetadataURL: URL {
        let name = ".well-known/oauth-authorization-server"
        guard var components = URLComponents(string: issuer) else { return wellKnown("oauth-authorization-server") }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        components.percentEncodedPath = "/" + name + path
        return components.url ?? wellKnown("oauth-authorization-server")
    }
    /// Where RFC 8414 metadata is looked for: ``authorizationServerMetadataURL``, then (for an
    /// issuer with a path) the form some servers use instead, appended to the issuer as OIDC
    /// Discovery's is. Both documents must name the configured issuer exactly.
    var authorizationServerMetadataURLs: [URL] {
        let appended = wellKnown("oauth-authorization-server")
        let inserted = authorizationServerMetadataURL
        return inserted == appended ? [inserted] : [inserted, appended]
    }

    private func wellKnown(_ name: String) -> URL {
        let base = issuer.hasSuffix("/") ? issuer : issuer + "/"
        return URL(string: base + ".well-known/" + name) ?? domain.appendingPathComponent(".well-known/" + name)
    }

    /// A validated configuration from a URL string such as `"https://tenant.auth0.com"`.
    /// - Throws: ``AuthSessionError/Code/insecureConfiguration`` as the `URL` initializer,
    ///   and for a string that is not a URL.
    public init(
        domain: String, clientID: String, clientSecret: SecretBytes? = nil, requestTimeout: Duration = .seconds(30),
        audience: String? = nil
    ) throws {
        guard let url = URL(string: domain) else {
            throw AuthSessionError(.insecureConfiguration, "The domain is not a valid URL.")
        }
        try self.init(
            domain: url, clientID: clientID, clientSecret: clientSecret, requestTimeout: requestTimeout, audience: audience)
    }

    /// `{domain}/authorize`: where the browser sign-in starts (Auth0's path; the `issuer:` form
    /// uses ``AuthorizationServerMetadata/authorizationEndpoint``).
    public var authorizationEndpoint: URL { endpoint(.authorize) }
    /// `{domain}/oauth/token`.
    public var tokenEndpoint: URL { endpoint(.token) }
    /// `{domain}/oauth/revoke`.
    public var revocationEndpoint: URL { endpoint(.revoke) }

    private func endpoint(_ path: ServerDialect.Auth0Path) -> URL { ServerDialect.auth0Endpoint(path, domain: domain) }

    static func validate(domain: URL) throws {
        guard let scheme = domain.scheme?.lowercased() else {
            throw AuthSessionError(
                .insecureConfiguration, "The domain has no scheme: use https://tenant.auth0.com.")
        }
        guard let components = URLComponents(url: domain, resolvingAgainstBaseURL: false),
            let host = components.host, !host.isEmpty
        else {
            throw AuthSessionError(.insecureConfiguration, "The domain has no host.")
        }
        guard components.user == nil, components.password == nil else {
            throw AuthSessionError(.insecureConfiguration, "The domain must not carry a user name or password.")
        }
        guard components.query == nil, components.fragment == nil else {
            throw AuthSessionError(.insecureConfiguration, "The domain must not carry a query or a fragment.")
        }
        switch scheme {
        case "https":
            return
        case "http":
            guard isLoopback(host: host) else {
                throw AuthSessionError(
                    .insecureConfiguration,
                    "Plain http:// is allowed only to a loopback host (localhost, 127.0.0.0/8, ::1); use https://.")
            }
        default:
            throw AuthSessionError(.insecureConfiguration, "The domain's scheme must be https.")
        }
    }

    /// An endpoint from a discovery document: https, or http to a loopback host.
    static func validateEndpoint(_ url: URL) throws(AuthSessionError) {
        do { try validate(domain: url) } catch let error as AuthSessionError { throw error } catch {
            throw AuthSessionError(.insecureConfiguration, "The endpoint is not valid.")
        }
    }

    /// Exactly `localhost` (pinned to 127.0.0.1 and ::1 by the transport, never resolved), an
    /// IPv4 literal in `127.0.0.0/8`, or `::1` (bracketed or not). A trailing dot is not
    /// removed: `localhost.` is a name the system resolver sends to DNS.
    static func isLoopback(host rawHost: String) -> Bool {
        var host = rawHost.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { return true }
        if host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return false }
        var values: [Int] = []
        for octet in octets {
            guard !octet.isEmpty, octet.count <= 3, octet.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = Int(octet), value <= 255
            else { return false }
            values.append(value)
        }
        return values[0] == 127
    }
}
