import FoundationEssentials
import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// The endpoints of the configured server, resolved once and cached.
///
/// For a `domain:` configuration they are Auth0's fixed paths (no request). For an `issuer:`
/// configuration the OpenID Connect discovery document is fetched before the first request
/// that needs it and kept for ``AuthorizationServerConfiguration/discoveryLifetime`` in memory
/// and, when a file is given, in a file beside the store (mode 0600, never followed through a
/// symlink; the document is public, so it is not sealed). When the server cannot be reached, a
/// cached document is used however old. Concurrent callers share one fetch.
package actor DiscoveryCache {
    /// The largest document accepted.
    static let maximumBodyBytes = 256 * 1024

    private struct Stored: Codable {
        /// The configured issuer the document was fetched for (Entra's document names a template).
        var configuredIssuer: String
        var fetchedAt: Double
        var metadata: AuthorizationServerMetadata
    }

    let configuration: AuthorizationServerConfiguration
    /// The file the document is kept in across processes, or `nil` (memory only).
    let filePath: String?
    private let transport: any HTTPTransport
    private let logger: TokenStoreLogger
    private let now: @Sendable () -> Date
    private var cached: Stored?
    private var inFlight: Task<AuthorizationServerMetadata, any Error>?
    /// Documents fetched so far (for tests and diagnostics).
    private(set) var fetchCount = 0

    init(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport, filePath: String?,
        logger: TokenStoreLogger = .disabled, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.filePath = filePath
        self.logger = logger
        self.now = now
    }

    /// The server's metadata: from memory or the file while younger than the lifetime,
    /// otherwise fetched; a stale copy when the fetch fails for a transient reason.
    /// - Throws: ``AuthSessionError`` — the fetch's code (`notConnectedToInternet`, `timedOut`,
    ///   `serverError`, `unexpectedResponse`, …) when nothing is cached, and always
    ///   `insecureConfiguration` for a document naming another issuer or a non-https endpoint.
    func metadata() async throws(AuthSessionError) -> AuthorizationServerMetadata {
        guard configuration.usesDiscovery else { return .auth0(domain: configuration.domain) }
        if cached == nil { cached = readFile() }
        let current = now().timeIntervalSince1970
        let lifetime = Double(configuration.discoveryLifetime.components.seconds)
        if let cached, current >= cached.fetchedAt, current - cached.fetchedAt < lifetime { return cached.metadata }
        let task: Task<AuthorizationServerMetadata, any Error>
        if let inFlight {
            task = inFlight
        } else {
            let configuration = configuration
            let transport = transport
            task = Task { try await Self.fetch(configuration: configuration, transport: transport) }
            inFlight = task
            fetchCount += 1
        }
        do {
            let fresh = try await task.value
            inFlight = nil
            let stored = Stored(configuredIssuer: configuration.issuer, fetchedAt: current, metadata: fresh)
            cached = stored
            writeFile(stored)
            return fresh
        } catch {
            inFlight = nil
            let failure = (error as? AuthSessionError) ?? AuthSessionError(.unexpectedResponse, "Discovery failed.")
            if failure.isTransient, let cached {
                logger.info("Using a stale discovery document: the server could not be reached.",
                    metadata: ["error.code": failure.code.rawValue])
                return cached.metadata
            }
            throw failure
        }
    }

    private static func fetch(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport
    ) async throws -> AuthorizationServerMetadata {
        let body = try await get(configuration.discoveryURL, configuration: configuration, transport: transport)
        var fallback: URL?
        if !Self.hasRevocationEndpoint(body) {
            // RFC 8414 metadata may name a revocation endpoint the OIDC document lacks.
            if let other = try? await get(
                configuration.authorizationServerMetadataURL, configuration: configuration, transport: transport)
            {
                fallback = AuthorizationServerMetadata.revocationEndpoint(
                    inAuthorizationServerMetadata: other, expectedIssuer: configuration.issuer)
            }
        }
        return try AuthorizationServerMetadata.discovered(
            body, expectedIssuer: configuration.issuer, revocationFallback: fallback)
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

    // MARK: File

    private func readFile() -> Stored? {
        guard let filePath, let stored = Self.readStored(atPath: filePath), stored.configuredIssuer == configuration.issuer
        else { return nil }
        return stored
    }

    /// The discovery document kept beside a store (`STORE.discovery.json`), for `tokenctl
    /// status`: the issuer it was fetched for, when, and the endpoints; `nil` when there is none
    /// (or it is not a regular file of this user's, or not one this code wrote).
    package static func document(atPath path: String) -> (issuer: String, fetchedAt: Date, metadata: AuthorizationServerMetadata)? {
        guard let stored = readStored(atPath: path) else { return nil }
        return (stored.configuredIssuer, Date(timeIntervalSince1970: stored.fetchedAt), stored.metadata)
    }

    private static func readStored(atPath filePath: String) -> Stored? {
        let fd = open(filePath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid(),
            info.st_size <= maximumBodyBytes
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var total = 0
        while total < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) }
            guard count > 0 else { return nil }
            total += count
        }
        return try? JSONDecoder().decode(Stored.self, from: Data(bytes))
    }

    private func writeFile(_ stored: Stored) {
        guard let filePath, let data = try? JSONEncoder().encode(stored) else { return }
        let temporary = filePath + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let bytes = [UInt8](data)
        var total = 0
        while total < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + total, $0.count - total) }
            guard count > 0 else { break }
            total += count
        }
        let complete = total == bytes.count && fsync(fd) == 0
        close(fd)
        if complete, rename(temporary, filePath) == 0 { return }
        unlink(temporary)
    }
}
