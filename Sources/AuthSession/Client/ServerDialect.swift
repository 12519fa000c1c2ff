import FoundationEssentials

/// How one authorization server is spoken to: Auth0's dialect (fixed paths, `audience=`,
/// `connection=`) or standard OpenID Connect (endpoints from the discovery document, RFC 8707
/// `resource=`). Decided once, by the configuration's form (`domain:` or `issuer:`); every
/// request reads its parameter names here, so a provider's quirk is one place.
///
/// ``additionalParameters`` is the escape hatch for what the library does not name (Auth0's
/// `organization`, a provider's own hint): sent on the authorization request (in the URL, or
/// pushed with PAR), the device authorization request and every token request (code exchange,
/// refresh, device code). A server ignores a parameter it does not know (RFC 6749 §3.1, §3.2).
/// A parameter the library sends itself is never one of them (see ``reservedParameterNames``).
///
/// ```swift
/// var configuration = try AuthorizationServerConfiguration(domain: "https://tenant.auth0.com", clientID: "abc")
/// try configuration.setAdditionalParameters(["organization": "org_123"])
/// ```
public struct ServerDialect: Sendable, Equatable {
    /// Which family of servers.
    public enum Family: String, Sendable, Equatable {
        /// An Auth0 tenant by its domain: Auth0's fixed paths.
        case auth0
        /// Any OpenID Connect provider by its issuer: the discovery document's endpoints.
        case openIDConnect
    }

    /// Which family of servers; fixed when the configuration is made.
    public let family: Family
    /// Whether a browser sign-in sends its `connection` (Auth0's parameter): `true` for Auth0,
    /// `false` for OpenID Connect unless the app sets it (an Auth0 tenant configured by its issuer).
    public var sendsConnection: Bool
    /// Whether a sign-in asks for `offline_access`: `nil` (default) asks when the server's
    /// `scopes_supported` lists it (always for Auth0 and for a document without the list).
    public var requestsOfflineAccess: Bool?
    /// Parameters added to the authorization, device authorization and token requests, sent in
    /// name order after the library's own. Set with
    /// ``AuthorizationServerConfiguration/setAdditionalParameters(_:)``.
    public private(set) var additionalParameters: [String: String] = [:]

    /// Auth0's dialect.
    public static let auth0 = ServerDialect(family: .auth0, sendsConnection: true)
    /// Standard OpenID Connect, endpoints from discovery.
    public static let openIDConnect = ServerDialect(family: .openIDConnect, sendsConnection: false)

    private init(family: Family, sendsConnection: Bool) {
        self.family = family
        self.sendsConnection = sendsConnection
    }

    /// Whether endpoints come from OpenID Connect Discovery rather than Auth0's paths.
    public var usesDiscovery: Bool { family == .openIDConnect }

    /// The name the API an access token is for goes under: Auth0's `audience`, RFC 8707
    /// `resource` everywhere else.
    public var apiParameterName: String { family == .auth0 ? "audience" : "resource" }

    /// The name of the connection parameter when a sign-in sends one (`connection`), else `nil`.
    public var connectionParameterName: String? { sendsConnection ? "connection" : nil }

    /// Whether a sign-in at a server described by `metadata` asks for `offline_access`: as the
    /// app set ``requestsOfflineAccess``, else always at Auth0, else when the document offers it.
    public func asksOfflineAccess(_ metadata: AuthorizationServerMetadata) -> Bool {
        requestsOfflineAccess ?? (family == .auth0 || metadata.offersOfflineAccess)
    }

    /// Whether a refresh token's rotation may revoke the access tokens issued under the old one
    /// (django-oauth-toolkit does): then the other cached ones are dropped. Auth0 keeps them.
    var rotationRevokesAccessTokens: Bool { family == .openIDConnect }

    /// The parameters the library sends itself on an authorization or token request: none of
    /// them can be an additional parameter, so the escape hatch never replaces or repeats the
    /// client's identity, the redirect, `state`, `nonce`, PKCE, the grant, DPoP's `dpop_jkt`
    /// nor what the library names for itself (scope, audience/resource, connection, prompt…).
    public static let reservedParameterNames: Set<String> = [
        "client_id", "client_secret", "client_assertion", "client_assertion_type", "response_type", "response_mode",
        "redirect_uri", "state", "nonce", "code_challenge", "code_challenge_method", "code", "code_verifier",
        "grant_type", "refresh_token", "device_code", "subject_token", "subject_token_type", "user_profile",
        "request", "request_uri", "dpop_jkt", "scope", "audience", "resource", "connection", "prompt", "login_hint",
        "max_age", "acr_values", "token", "token_type_hint",
    ]

    /// Replaces ``additionalParameters`` (see ``AuthorizationServerConfiguration/setAdditionalParameters(_:)``).
    mutating func setAdditionalParameters(_ parameters: [String: String]) throws {
        for (name, value) in parameters {
            guard !Self.reservedParameterNames.contains(name.lowercased()) else {
                throw AuthSessionError(
                    .insecureConfiguration,
                    "An additional parameter cannot replace one the library sends itself (\(name)).")
            }
            guard !name.isEmpty, name.utf8.count <= 2048, value.utf8.count <= 2048,
                name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-._:".unicodeScalars.contains($0)) })
            else {
                throw AuthSessionError(
                    .insecureConfiguration,
                    "An additional parameter's name must be 1 to 2,048 characters of A-Z a-z 0-9 - . _ : and its value at most 2,048 bytes.")
            }
        }
        additionalParameters = parameters
    }

    /// `form` with ``additionalParameters`` appended in name order, leaving out any name the
    /// form already carries (never the case once validated; the library's value always wins).
    func adding(to form: [(String, FormValue)]) -> [(String, FormValue)] {
        let present = Set(form.map(\.0))
        return form + additionalParameters.sorted { $0.key < $1.key }.filter { !present.contains($0.key) }.map { ($0.key, .text($0.value)) }
    }

    // MARK: Auth0's paths, written once

    /// An Auth0 endpoint under the tenant's domain.
    enum Auth0Path: String, CaseIterable {
        case authorize = "authorize"
        case token = "oauth/token"
        case revoke = "oauth/revoke"
        case jwks = ".well-known/jwks.json"
        case userinfo = "userinfo"
        case deviceCode = "oauth/device/code"
        case logout = "v2/logout"
    }

    /// The issuer of an Auth0 tenant: its domain with one trailing `/`.
    static func auth0Issuer(domain: URL) -> String {
        var issuer = domain.absoluteString
        if !issuer.hasSuffix("/") { issuer += "/" }
        return issuer
    }

    /// `{domain}/{path}` for an Auth0 tenant.
    static func auth0Endpoint(_ path: Auth0Path, domain: URL) -> URL {
        var components = URLComponents(url: domain, resolvingAgainstBaseURL: false) ?? URLComponents()
        var base = components.path
        while base.hasSuffix("/") { base.removeLast() }
        components.path = base + "/" + path.rawValue
        // The domain is validated when the configuration is made: a URL with scheme and host always rebuilds.
        return components.url ?? domain.appendingPathComponent(path.rawValue)
    }
}
