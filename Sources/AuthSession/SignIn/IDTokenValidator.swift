import FoundationEssentials
import TokenStore

/// Validates an ID token the way Auth0.swift's `IDTokenValidator` does, with a real
/// 60-second leeway (Auth0.swift's default of `60 * 1000` is added as seconds).
///
/// The checks run in Auth0.swift's order and the first failure wins; each failure is
/// ``AuthSessionError/Code/idTokenInvalid`` naming the ``IDTokenCheck``, never the token or a
/// claim value:
///
/// | check | rule |
/// |---|---|
/// | format | three base64url parts, a JSON header without `crit`, JSON claims |
/// | algorithm | `alg` is `RS256` (`none`, `HS256`, anything else refused) |
/// | keyID | `kid` present and in the tenant's JWKS (cached 6 h; fetched again if unknown, at most once a minute) |
/// | signingKey | that key has `kty` RSA, `alg` RS256 if present, `use` sig if present, `key_ops` with verify if present, an odd exponent above 1, ≥ 2048 bits, no ROCA fingerprint |
/// | signature | RSASSA-PKCS1-v1_5 with SHA-256 verifies (libcrypto) |
/// | issuer | `iss` equals the issuer URL, trailing slash included |
/// | subject | `sub` is a non-empty string |
/// | audience | `aud` (string or array) contains the client id |
/// | expiration | `exp + leeway > now` |
/// | issuedAt | `iat` present and not later than `now + leeway` |
/// | nonce | `nonce` equals the one sent, when one was sent |
/// | authorizedParty | `azp` equals the client id whenever present; required when `aud` has several entries |
/// | authenticationTime | `auth_time` present and `auth_time + max_age + leeway ≥ now`, when `max_age` was sent |
/// | authenticationContext | `acr` present and one of the `acr_values` sent, when some were sent |
///
/// ```swift
/// let validator = IDTokenValidator(configuration: configuration, transport: transport)
/// let claims = try await validator.validate(idToken, nonce: secrets.nonce)
/// ```
struct IDTokenValidator: Sendable {
    /// The clock skew tolerated on `exp` and `auth_time`.
    static let defaultLeeway: Duration = .seconds(60)

    /// The expected `iss`: ending in `/` for the Auth0 form; for a discovery configuration,
    /// the discovery document's issuer (taken by ``validate(_:nonce:maxAge:acrValues:)`` before each check).
    let issuer: String
    /// Other spellings of the issuer the app accepts (``AuthorizationServerConfiguration/acceptedIssuerAliases``).
    var issuerAliases: [String] = []
    /// The tenants a multi-tenant issuer accepts (``AuthorizationServerConfiguration/acceptedTenants``).
    var acceptedTenants: [String]?
    /// The discovery configuration's metadata, or `nil` for a fixed issuer.
    private(set) var discovery: DiscoveryCache?
    /// The expected audience (the app's client id).
    let clientID: String
    /// The clock skew tolerated.
    let leeway: Duration
    /// The tenant's signing keys.
    let keys: JSONWebKeySetCache
    private let now: @Sendable () -> Date

    /// A validator for tokens of `issuer` (`https://tenant.auth0.com/`; a missing trailing
    /// slash is added) and `clientID`, fetching keys through `transport`.
    init(
        issuer: URL, clientID: String, transport: any HTTPTransport, leeway: Duration = defaultLeeway,
        requestTimeout: Duration = .seconds(30), logger: TokenStoreLogger = .disabled,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        var issuer = issuer.absoluteString
        if !issuer.hasSuffix("/") { issuer += "/" }
        self.issuer = issuer
        self.clientID = clientID
        self.leeway = leeway
        self.now = now
        keys = JSONWebKeySetCache(issuer: issuer, transport: transport, timeout: requestTimeout, logger: logger, now: now)
    }

    /// A validator for the tenant of `configuration`: issuer `{domain}/`.
    init(
        configuration: AuthorizationServerConfiguration, transport: any HTTPTransport,
        leeway: Duration = defaultLeeway, logger: TokenStoreLogger = .disabled,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            issuer: configuration.domain, clientID: configuration.clientID, transport: transport, leeway: leeway,
            requestTimeout: configuration.requestTimeout, logger: logger, now: now)
    }

    /// A validator for the server of `client`: for a discovery configuration, the issuer and
    /// `jwks_uri` of its discovery document, compared exactly (OIDC Core 3.1.3.7).
    init(client: AuthorizationServerClient, logger: TokenStoreLogger = .disabled) {
        self.init(configuration: client.configuration, transport: client.transport, logger: logger)
        if client.configuration.usesDiscovery {
            issuerAliases = client.configuration.acceptedIssuerAliases
            acceptedTenants = client.configuration.acceptedTenants
            discovery = client.discovery
        }
    }

    /// Whether `claimed` (the token's `iss`) is the expected issuer: exactly `expected`, one of
    /// the app's aliases, or, for a templated issuer (Microsoft Entra's `{tenantid}`), the
    /// template with the token's `tid` put in (one of `acceptedTenants` when the app names them).
    static func issuerMatches(
        _ claimed: String?, expected: String, aliases: [String], tenantID: String?, acceptedTenants: [String]? = nil
    ) -> Bool {
        guard let claimed else { return false }
        if claimed == expected || aliases.contains(claimed) { return true }
        if expected.contains("{tenantid}"), let tenantID, !tenantID.isEmpty,
            tenantID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }),
            acceptedTenants.map({ $0.contains(tenantID) }) ?? true
        {
            return claimed == expected.replacing("{tenantid}", with: tenantID)
        }
        return false
    }

    /// The one signature algorithm accepted.
    static let algorithm = "RS256"

    /// The JWS steps of ``validate(_:nonce:maxAge:acrValues:)``, in its order, each failure naming its
    /// check: `alg` is ``algorithm`` (else `algorithm`), the header has a `kid` for which `key`
    /// finds a JWK (else `keyID`), and ``verifyRS256(_:of:with:)`` accepts the signature of the
    /// signing input with that key.
    /// - Throws: ``AuthSessionError`` `idTokenInvalid` naming the check; what `key` throws.
    static func verifySignature(
        _ jws: JSONWebSignature, key: (String) async throws(AuthSessionError) -> JSONWebKey?
    ) async throws(AuthSessionError) {
        guard jws.header["alg"]?.string == algorithm else { throw .idTokenInvalid(check: .algorithm) }
        guard let keyID = jws.header["kid"]?.string, !keyID.isEmpty else { throw .idTokenInvalid(check: .keyID) }
        guard let jwk = try await key(keyID) else { throw .idTokenInvalid(check: .keyID) }
        try verifyRS256(jws.signature, of: jws.signingInput, with: jwk)
    }

    /// The key and signature steps: `jwk` is an RS256 signing key (``JSONWebKey/rs256Key()``,
    /// else `signingKey`) and `signature` its RSASSA-PKCS1-v1_5 SHA-256 signature of `message`
    /// (else `signature`).
    static func verifyRS256(_ signature: [UInt8], of message: [UInt8], with jwk: JSONWebKey) throws(AuthSessionError) {
        guard let key = jwk.rs256Key() else { throw .idTokenInvalid(check: .signingKey) }
        guard key.verifyRS256(signature: signature, message: message) else { throw .idTokenInvalid(check: .signature) }
    }

    /// Validates `idToken` and returns its claims.
    ///
    /// - Parameters:
    ///   - nonce: the `nonce` sent in the authorization request (`nil`: none was sent).
    ///   - maxAge: the `max_age` sent, if any.
    ///   - acrValues: the `acr_values` sent (empty: none).
    /// - Throws: ``AuthSessionError`` — `idTokenInvalid` with ``AuthSessionError/idTokenCheck``;
    ///   or, when the key set could not be fetched, the fetch's code (`notConnectedToInternet`,
    ///   `timedOut`, `serverError`, `unexpectedResponse`, …).
    func validate(
        _ idToken: SecretBytes, nonce: String?, maxAge: Duration? = nil, acrValues: [String] = []
    ) async throws(AuthSessionError)
        -> IDTokenClaims
    {
        guard let token = JSONWebToken(idToken) else { throw .idTokenInvalid(check: .format) }

        // Signature. The algorithm first, so a token of another one costs no request.
        guard token.header["alg"]?.string == Self.algorithm else { throw .idTokenInvalid(check: .algorithm) }
        var expectedIssuer = issuer
        if let discovery {
            let metadata = try await discovery.metadata()
            expectedIssuer = metadata.issuer
            await keys.use(url: metadata.jwksURI)
        }
        try await Self.verifySignature(token.jws) { keyID throws(AuthSessionError) in try await keys.key(id: keyID) }

        // Claims.
        let claims = token.claims
        let current = now().timeIntervalSince1970
        let leewaySeconds = leeway.timeInterval
        guard
            Self.issuerMatches(
                claims["iss"]?.string, expected: expectedIssuer, aliases: issuerAliases, tenantID: claims["tid"]?.string,
                acceptedTenants: acceptedTenants)
        else { throw .idTokenInvalid(check: .issuer) }
        guard let subject = claims["sub"]?.string, !subject.isEmpty else { throw .idTokenInvalid(check: .subject) }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let entries)?: audiences = entries.compactMap(\.string)
        default: audiences = []
        }
        guard audiences.contains(clientID) else { throw .idTokenInvalid(check: .audience) }
        guard let expiresAt = claims["exp"]?.number, expiresAt + leewaySeconds > current else {
            throw .idTokenInvalid(check: .expiration)
        }
        // A token "issued" in the future (beyond the clock skew) is refused (OIDC Core 3.1.3.7).
        guard let issuedAt = claims["iat"]?.number, issuedAt <= current + leewaySeconds else {
            throw .idTokenInvalid(check: .issuedAt)
        }
        if let nonce {
            guard let received = claims["nonce"]?.string,
                ConstantTime.equal(Array(received.utf8), Array(nonce.utf8))
            else { throw .idTokenInvalid(check: .nonce) }
        }
        // azp is checked whenever present, and required with several audiences (OIDC Core 2).
        if audiences.count > 1 || claims["azp"] != nil {
            guard claims["azp"]?.string == clientID else { throw .idTokenInvalid(check: .authorizedParty) }
        }
        let authenticatedAt = claims["auth_time"]?.number
        if let maxAge {
            guard let authenticatedAt, authenticatedAt + maxAge.timeInterval + leewaySeconds >= current else {
                throw .idTokenInvalid(check: .authenticationTime)
            }
        }
        // acr_values is a request the server may not meet (OIDC Core 5.5.1.1); the app asked for
        // those classes, so a token of another one (or of none) is refused.
        if !acrValues.isEmpty {
            guard let acr = claims["acr"]?.string, acrValues.contains(acr) else {
                throw .idTokenInvalid(check: .authenticationContext)
            }
        }

        let emailVerified: Bool?
        switch claims["email_verified"] {
        case .bool(let value)?: emailVerified = value
        case .string("true")?: emailVerified = true
        case .string("false")?: emailVerified = false
        default: emailVerified = nil
        }
        return IDTokenClaims(
            subject: subject, name: claims["name"]?.string, email: claims["email"]?.string, emailVerified: emailVerified,
            issuedAt: Date(timeIntervalSince1970: issuedAt), expiresAt: Date(timeIntervalSince1970: expiresAt),
            authenticatedAt: authenticatedAt.map(Date.init(timeIntervalSince1970:)))
    }
}
