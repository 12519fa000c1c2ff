import FoundationEssentials
import TokenStore

/// The endpoints of the configured server, resolved once and cached.
///
/// For a `domain:` configuration they are Auth0's fixed paths (no request). For an `issuer:`
/// configuration the OpenID Connect discovery document is fetched before the first request
/// that needs it and kept for ``AuthorizationServerConfiguration/discoveryLifetime`` in memory
/// and, with a store, sealed in the store (``TokenStore`` keeps the bytes as they came): a copy
/// read back passes the same checks as a fetched document, and a copy that does not open is
/// an integrity failure, never used. When the server cannot be reached, a cached document is
/// used however old. Concurrent callers share one fetch.
package actor DiscoveryCache {
    /// The largest document accepted.
    static let maximumBodyBytes = 256 * 1024

    /// A document, the bytes it was read from, and where it came from.
    struct Entry: Sendable {
        let metadata: AuthorizationServerMetadata
        let document: ServerDocument
        /// Fetched by this process (not read back from the store).
        let fetchedHere: Bool
    }

    let configuration: AuthorizationServerConfiguration
    /// The store the document is kept in across processes, or `nil` (memory only).
    let store: TokenStore?
    private let transport: any HTTPTransport
    private let logger: TokenStoreLogger
    private let now: @Sendable () -> Date
    private var cached: Entry?
    private var readStore = false
    private var inFlight: Task<(AuthorizationServerMetadata, ServerDocument), any Error>?
    /// Documents fetched so far (for tests and diagnostics).
    private(set) var fetchCount = 0

    init(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport, store: TokenStore?,
        logger: TokenStoreLogger = .disabled, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.store = store
        self.logger = logger
        self.now = now
    }

    /// The server's metadata: from memory or the store while younger than the lifetime,
    /// otherwise fetched; a stale copy when the fetch fails for a transient reason.
    /// - Throws: ``AuthSessionError`` — the fetch's code (`notConnectedToInternet`, `timedOut`,
    ///   `serverError`, `unexpectedResponse`, …) when nothing is cached; always
    ///   `insecureConfiguration` for a document naming another issuer or a non-https endpoint;
    ///   `storage` (`integrityCheckFailed`) for a kept copy that was altered: nothing is sent.
    func metadata() async throws(AuthSessionError) -> AuthorizationServerMetadata {
        guard configuration.usesDiscovery else { return .auth0(domain: configuration.domain) }
        return try await entry().metadata
    }

    /// The entry behind ``metadata()`` (an `issuer:` configuration's).
    func entry() async throws(AuthSessionError) -> Entry {
        try await readStoreOnce()
        let current = now()
        let lifetime = Double(configuration.discoveryLifetime.components.seconds)
        if let cached, current >= cached.document.fetchedAt, current.timeIntervalSince(cached.document.fetchedAt) < lifetime {
            return cached
        }
        do {
            return try await fetched()
        } catch {
            if error.isTransient, let cached {
                logger.info("Using a stale discovery document: the server could not be reached.",
                    metadata: ["error.code": error.code.rawValue])
                return cached
            }
            throw error
        }
    }

    /// A document fetched from the server now, whatever is cached (and then kept): when the
    /// cached one disagrees with what a token is bound to, only the server itself is believed.
    func fetched() async throws(AuthSessionError) -> Entry {
        try await readStoreOnce()
        let task: Task<(AuthorizationServerMetadata, ServerDocument), any Error>
        if let inFlight {
            task = inFlight
        } else {
            let configuration = configuration
            let transport = transport
            let fetchedAt = now()
            task = Task { try await Self.fetch(configuration: configuration, transport: transport, at: fetchedAt) }
            inFlight = task
            fetchCount += 1
        }
        let metadata: AuthorizationServerMetadata
        var document: ServerDocument
        do {
            (metadata, document) = try await task.value
            inFlight = nil
        } catch {
            inFlight = nil
            throw (error as? AuthSessionError) ?? AuthSessionError(.unexpectedResponse, "Discovery failed.")
        }
        if let previous = cached {
            let before = ServerEndpoints(issuer: configuration.issuer, previous.metadata)
            if before != ServerEndpoints(issuer: configuration.issuer, metadata) {
                logger.info("The server's discovery document names other endpoints than the copy kept before.",
                    metadata: ["endpoints.changed": before.token != metadata.tokenEndpoint.absoluteString ? "token" : "revocation"])
                document = ServerDocument(
                    issuer: document.issuer, document: document.document, supplement: document.supplement,
                    fetchedAt: document.fetchedAt, previousEndpoints: before, changedAt: document.fetchedAt)
            } else if let change = previous.document.changedAt {
                // Unchanged since: the last change stays on record.
                document = ServerDocument(
                    issuer: document.issuer, document: document.document, supplement: document.supplement,
                    fetchedAt: document.fetchedAt, previousEndpoints: previous.document.previousEndpoints, changedAt: change)
            }
        }
        let entry = Entry(metadata: metadata, document: document, fetchedHere: true)
        cached = entry
        await keep(document)
        return entry
    }

    private static func fetch(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport, at fetchedAt: Date
    ) async throws -> (AuthorizationServerMetadata, ServerDocument) {
        let body = try await get(configuration.discoveryURL, configuration: configuration, transport: transport)
        var supplement: [UInt8]?
        if !Self.hasRevocationEndpoint(body) {
            // RFC 8414 metadata may name a revocation endpoint the OIDC document lacks: at the
            // well-known URL RFC 8414 defines, else at the one appended to the issuer.
            for url in configuration.authorizationServerMetadataURLs {
                if let other = try? await get(url, configuration: configuration, transport: transport),
                    AuthorizationServerMetadata.revocationEndpoint(
                        inAuthorizationServerMetadata: other, expectedIssuer: configuration.issuer) != nil
                {
                    supplement = other
                    break
                }
            }
        }
        let document = ServerDocument(issuer: configuration.issuer, document: body, supplement: supplement, fetchedAt: fetchedAt)
        return (try Self.validated(document, configuration: configuration), document)
    }

    /// The metadata of `document`, checked as a fetched document is: the issuer, every endpoint,
    /// the supplement's issuer and revocation endpoint.
    static func validated(
        _ document: ServerDocument, configuration: AuthorizationServerConfiguration
    ) throws(AuthSessionError) -> AuthorizationServerMetadata {
        let fallback = document.supplement.flatMap {
            AuthorizationServerMetadata.revocationEndpoint(inAuthorizationServerMetadata: $0, expectedIssuer: configuration.issuer)
        }
        return try AuthorizationServerMetadata.discovered(
            document.document, expectedIssuer: configuration.issuer, revocationFallback: fallback)
    }

    private static func hasRevocationEndpoint(_ body: [UInt8]) -> Bool {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(body)) else { return false }
        return value.object?["revocation_endpoint"]?.string != nil
    }

    private static func get(
        _ url: URL, configuration: AuthorizationServerConfiguration, transport: any HTTPTransport
    ) async throws(AuthSessionError) -> [UInt8] {
        let body = try await MetadataFetch.get(
            url, .init(noun: "the discovery document"), timeout: configuration.requestTimeout,
            maximumBytes: maximumBodyBytes, transport: transport)
        return [UInt8](body)
    }

    // MARK: The store

    /// Reads the store's copy into memory the first time a document is wanted.
    private func readStoreOnce() async throws(AuthSessionError) {
        guard cached == nil, !readStore else { return }
        cached = try await kept()  // a copy that does not open stays an error at every use
        readStore = true
    }

    /// The document kept in the store for the configured issuer, checked as a fetched one.
    /// A kept document that no longer passes today's checks is left unused (it is fetched
    /// again); one that does not open is `integrityCheckFailed`.
    private func kept() async throws(AuthSessionError) -> Entry? {
        guard let store else { return nil }
        let issuer = configuration.issuer
        let document: ServerDocument?
        do {
            document = try await store.onBlockingExecutor { try $0.serverDocument(issuer: issuer) }
        } catch let error as TokenStoreError {
            throw AuthSessionError.storage(error)
        } catch {
            throw AuthSessionError(.unexpectedResponse, "The kept discovery document could not be read.")
        }
        guard let document else { return nil }
        do {
            return Entry(metadata: try Self.validated(document, configuration: configuration), document: document, fetchedHere: false)
        } catch {
            logger.info("The kept discovery document fails today's checks; it is fetched again.", metadata: ["error.code": error.code.rawValue])
            return nil
        }
    }

    /// Keeps `document` sealed in the store; a store that cannot take it (read-only, locked)
    /// only costs the next process a fetch.
    private func keep(_ document: ServerDocument) async {
        guard let store else { return }
        do {
            try await store.onBlockingExecutor { try $0.saveServerDocument(document) }
        } catch {
            logger.info("The discovery document could not be kept in the store.",
                metadata: ["error.code": (error as? TokenStoreError)?.code.rawValue ?? "unexpected"])
        }
    }

    /// The documents kept in `store`, each checked as a fetched one (for `tokenctl status`):
    /// the metadata, or why it fails the checks.
    package static func documents(
        in store: TokenStore
    ) throws -> [(document: ServerDocument, metadata: AuthorizationServerMetadata?, problem: String?)] {
        try store.serverDocuments().map { document in
            // Checked against the issuer it was kept for, as the session checks it.
            do {
                let configuration = try AuthorizationServerConfiguration(issuer: document.issuer, clientID: "status")
                return (document, try validated(document, configuration: configuration), nil)
            } catch let error as AuthSessionError {
                return (document, nil, error.message)
            }
        }
    }
}

extension ServerEndpoints {
    /// The token and revocation endpoints of `metadata`, for the configured `issuer`.
    init(issuer: String, _ metadata: AuthorizationServerMetadata) {
        self.init(
            issuer: issuer, token: metadata.tokenEndpoint.absoluteString, revocation: metadata.revocationEndpoint?.absoluteString)
    }
}
