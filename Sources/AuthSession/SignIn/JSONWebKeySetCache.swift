import FoundationEssentials
import TokenStore

/// The tenant's signing keys, fetched from `{issuer}.well-known/jwks.json` through an
/// ``HTTPTransport`` and cached for the life of this object.
///
/// A lookup of a `kid` the cache does not hold fetches the set once (the first lookup, or a
/// key rotated in since): at most one request per lookup, so a token with a made-up `kid`
/// costs one request, never a loop.
actor JSONWebKeySetCache {
    /// The largest key set accepted.
    static let maximumBodyBytes = 256 * 1024

    let url: URL
    private let transport: any HTTPTransport
    private let timeout: Duration
    private let logger: TokenStoreLogger
    private var keys: [String: JSONWebKey]?
    /// Requests sent so far (for tests and diagnostics).
    private(set) var fetchCount = 0

    /// A cache for the key set of `issuer` (an issuer URL ending in `/`).
    init(issuer: String, transport: any HTTPTransport, timeout: Duration = .seconds(30), logger: TokenStoreLogger = .disabled) {
        // The issuer was validated as an absolute URL ending in "/", so appending a path works.
        url = URL(string: issuer + ".well-known/jwks.json")!
        self.transport = transport
        self.timeout = timeout
        self.logger = logger
    }

    /// The key with `keyID`, fetching the set once when it is not cached; `nil` when the
    /// fresh set does not have it either.
    /// - Throws: ``AuthSessionError`` from the fetch: `notConnectedToInternet`, `timedOut`,
    ///   `tlsFailure`, `cancelled`, `rateLimited`, `serverError`, `unexpectedResponse`.
    func key(id keyID: String) async throws(AuthSessionError) -> JSONWebKey? {
        if let key = keys?[keyID] { return key }
        let fresh = try await fetch()
        keys = fresh
        return fresh[keyID]
    }

    private func fetch() async throws(AuthSessionError) -> [String: JSONWebKey] {
        fetchCount += 1
        logger.debug("fetching the tenant's signing keys", metadata: ["jwks.fetch": "\(fetchCount)"])
        let response: HTTPResponse
        do {
            response = try await transport.send(
                HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"], timeout: timeout))
        } catch let failure as TransportFailure {
            throw ResponseClassifier.classify(failure).error
                ?? AuthSessionError(.unexpectedResponse, "The key set could not be fetched.")
        } catch {
            throw AuthSessionError(.unexpectedResponse, "The key set could not be fetched.", cause: .other("\(type(of: error))"))
        }
        switch response.status {
        case 200..<300:
            break
        case 429:
            throw AuthSessionError(.rateLimited, "The server is rate limiting key-set requests.", httpStatus: response.status)
        case 500..<600:
            throw AuthSessionError(.serverError, "The server failed to serve its key set.", httpStatus: response.status)
        default:
            throw AuthSessionError(
                .unexpectedResponse, "The key set request got an unexpected status.", httpStatus: response.status)
        }
        guard response.body.count <= Self.maximumBodyBytes, let keys = JSONWebKeySet.keys(in: response.body) else {
            throw AuthSessionError(.unexpectedResponse, "The key set is not a JSON Web Key Set.", httpStatus: response.status)
        }
        return keys
    }
}
