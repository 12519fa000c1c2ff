import FoundationEssentials
import TokenStore

/// The tenant's signing keys, fetched from `{issuer}.well-known/jwks.json` through an
/// ``HTTPTransport`` and cached for ``maximumAge`` (6 hours).
///
/// - A set older than ``maximumAge`` is fetched again before its keys are used, so a key the
///   tenant removed (rotated out after a compromise) stops being trusted within hours, not at
///   the app's next restart.
/// - A lookup of a `kid` the cached set does not hold fetches the set again (a key rotated in
///   since), at most once per ``unknownKeyRefetchInterval`` (a minute): tokens with made-up
///   `kid`s cost one request a minute, never one each. At most one request per lookup.
actor JSONWebKeySetCache {
    /// The largest key set accepted.
    static let maximumBodyBytes = 256 * 1024
    /// How long a fetched set is used.
    static let maximumAge: TimeInterval = 6 * 3600
    /// The least time between two fetches caused by an unknown `kid`.
    static let unknownKeyRefetchInterval: TimeInterval = 60

    private(set) var url: URL
    private let transport: any HTTPTransport
    private let timeout: Duration
    private let logger: TokenStoreLogger
    private let now: @Sendable () -> Date
    private var keys: [String: JSONWebKey]?
    /// When `keys` was fetched.
    private var fetchedAt: Date?
    /// When an unknown `kid` last caused a fetch.
    private var unknownKeyFetchedAt: Date?
    /// Requests sent so far (for tests and diagnostics).
    private(set) var fetchCount = 0

    /// A cache for the key set of `issuer` (an issuer URL ending in `/`), aged by `now`.
    init(
        issuer: String, transport: any HTTPTransport, timeout: Duration = .seconds(30), logger: TokenStoreLogger = .disabled,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        // The issuer was validated as an absolute URL ending in "/", so appending a path works.
        url = URL(string: issuer + ".well-known/jwks.json")!
        self.transport = transport
        self.timeout = timeout
        self.logger = logger
        self.now = now
    }

    /// Takes keys from `newURL` (a discovery document's `jwks_uri`) from now on; a change of
    /// URL drops the cached set.
    func use(url newURL: URL) {
        guard newURL != url else { return }
        url = newURL
        keys = nil
        fetchedAt = nil
        unknownKeyFetchedAt = nil
    }

    /// The key with `keyID` from a set at most ``maximumAge`` old, fetching the set when none
    /// is cached, when it is too old, or (at most once per ``unknownKeyRefetchInterval``) when
    /// it lacks `keyID`; `nil` when the set does not have it.
    /// - Throws: ``AuthSessionError`` from the fetch: `notConnectedToInternet`, `timedOut`,
    ///   `tlsFailure`, `cancelled`, `rateLimited`, `serverError`, `unexpectedResponse`.
    func key(id keyID: String) async throws(AuthSessionError) -> JSONWebKey? {
        let current = now()
        if let keys, let fetchedAt, current.timeIntervalSince(fetchedAt) < Self.maximumAge,
            current >= fetchedAt
        {
            if let key = keys[keyID] { return key }
            if let last = unknownKeyFetchedAt, current >= last,
                current.timeIntervalSince(last) < Self.unknownKeyRefetchInterval
            {
                return nil
            }
            unknownKeyFetchedAt = current
        }
        let fresh = try await fetch()
        keys = fresh
        fetchedAt = current
        return fresh[keyID]
    }

    private func fetch() async throws(AuthSessionError) -> [String: JSONWebKey] {
        fetchCount += 1
        logger.debug("fetching the tenant's signing keys", metadata: ["jwks.fetch": "\(fetchCount)"])
        let body = try await MetadataFetch.get(
            url, .init(noun: "the key set"), timeout: timeout, maximumBytes: Self.maximumBodyBytes, transport: transport)
        guard let keys = JSONWebKeySet.keys(in: body) else {
            throw AuthSessionError(.unexpectedResponse, "The key set is not a JSON Web Key Set.")
        }
        return keys
    }
}
