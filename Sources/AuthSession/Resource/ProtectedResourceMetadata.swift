import FoundationEssentials

/// What the session reads of an API's protected resource metadata (RFC 9728): its resource
/// identifier and the authorization servers (issuer identifiers) whose tokens it takes.
struct ProtectedResourceMetadata: Sendable, Equatable {
    /// `resource`: the API's resource identifier.
    let resource: String
    /// `authorization_servers` (may be empty: the API did not say).
    let authorizationServers: [String]

    /// The most bytes of a metadata document read (64 KiB).
    static let maximumBytes = 64 * 1024

    private static let subject = MetadataFetch.Subject(noun: "the API's protected resource metadata")

    /// Fetches `url` (a `resource_metadata` the API named; `https`, or `http` to loopback,
    /// without credentials or fragment), decodes it and checks it for a request to `requestURL`
    /// by a client of `issuer` (``check(requestURL:issuer:)``).
    ///
    /// - Throws: ``AuthSessionError`` — `insecureConfiguration` (the metadata URL), the network
    ///   codes, `unexpectedResponse` (not a JSON object with a string `resource`, over 64 KiB, a
    ///   status other than 2xx, a `resource` that is not the API requested), `issuerMismatch` (the
    ///   configured issuer is not among `authorization_servers`).
    static func fetchAndCheck(
        _ url: URL, requestURL: URL, issuer: String, transport: any HTTPTransport, timeout: Duration
    ) async throws(AuthSessionError) -> ProtectedResourceMetadata {
        guard Self.isAllowedURL(url) else {
            throw AuthSessionError(
                .insecureConfiguration,
                "The API named protected resource metadata at a URL that is not https (or http to a loopback host), "
                    + "or that carries a user name, password or fragment; it was not fetched.")
        }
        let body = try await MetadataFetch.get(url, subject, timeout: timeout, maximumBytes: maximumBytes, transport: transport)
        let metadata = try decode(body)
        try metadata.check(requestURL: requestURL, issuer: issuer)
        return metadata
    }

    /// The document in `body`: a JSON object with a string `resource` and, when present, an
    /// array of strings `authorization_servers`.
    static func decode(_ body: Data) throws(AuthSessionError) -> ProtectedResourceMetadata {
        guard body.count <= maximumBytes, let value = try? JSONDecoder().decode(JSONValue.self, from: body),
            let object = value.object, let resource = object["resource"]?.string, !resource.isEmpty
        else {
            throw AuthSessionError(
                .unexpectedResponse, "The API's protected resource metadata is not a JSON object with a resource.")
        }
        var servers: [String] = []
        switch object["authorization_servers"] {
        case nil, .null?:
            break
        case .array(let items)?:
            for item in items {
                guard let server = item.string else {
                    throw AuthSessionError(
                        .unexpectedResponse, "The API's protected resource metadata lists an authorization server that is not a string.")
                }
                servers.append(server)
            }
        default:
            throw AuthSessionError(
                .unexpectedResponse, "The API's protected resource metadata has authorization_servers that is not an array.")
        }
        return ProtectedResourceMetadata(resource: resource, authorizationServers: servers)
    }

    /// RFC 9728 3.3: the metadata is used only when its `resource` is the API that was
    /// requested — the request's origin (scheme, host, port), with a path that is the request's
    /// path or one of its parent paths (`https://api.example` and `https://api.example/v1` both
    /// fit `https://api.example/v1/notes`), without a query or fragment unless identical to the
    /// request URL. Then the configured `issuer` must be one of `authorization_servers`,
    /// compared exactly: another server is refused, never followed.
    func check(requestURL: URL, issuer: String) throws(AuthSessionError) {
        guard Self.resource(resource, fits: requestURL) else {
            throw AuthSessionError(
                .unexpectedResponse,
                "The API's protected resource metadata describes another resource than the one requested (RFC 9728 3.3); "
                    + "it was not used.")
        }
        guard authorizationServers.contains(issuer) else {
            throw AuthSessionError(
                .issuerMismatch,
                "The API's protected resource metadata does not name the configured issuer among its authorization "
                    + "servers (\(authorizationServers.count) named): its tokens come from another authorization server, "
                    + "which is never followed. Check the API and the configured issuer.")
        }
    }

    /// Whether the resource identifier `resource` names the API at `url` (see ``check(requestURL:issuer:)``).
    static func resource(_ resource: String, fits url: URL) -> Bool {
        guard let claimed = URLComponents(string: resource), let requested = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = claimed.scheme?.lowercased(), scheme == requested.scheme?.lowercased(),
            let host = claimed.host?.lowercased(), !host.isEmpty, host == requested.host?.lowercased(),
            claimed.user == nil, claimed.password == nil, claimed.fragment == nil,
            Self.port(claimed) == Self.port(requested)
        else { return false }
        if claimed.query != nil {
            var bare = requested
            bare.fragment = nil
            return resource == bare.string
        }
        let base = claimed.percentEncodedPath.hasSuffix("/") ? String(claimed.percentEncodedPath.dropLast()) : claimed.percentEncodedPath
        let path = requested.percentEncodedPath
        return base.isEmpty || path == base || path.hasPrefix(base + "/")
    }

    private static func port(_ components: URLComponents) -> Int? {
        if let port = components.port { return port }
        switch components.scheme?.lowercased() {
        case "https": return 443
        case "http": return 80
        default: return nil
        }
    }

    /// `https` with a host, or `http` to a loopback host; no user name, password or fragment.
    static func isAllowedURL(_ url: URL) -> Bool {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil, components.fragment == nil
        else { return false }
        return scheme == "https" || (scheme == "http" && AuthorizationServerConfiguration.isLoopback(host: host))
    }
}
