/// The ID-token validation checks, in the order they run (the first failure wins), after
/// Auth0.swift's `IDTokenValidator`.
///
/// Carried by ``AuthSessionError/idTokenCheck`` when the code is
/// ``AuthSessionError/Code/idTokenInvalid``:
///
/// ```swift
/// catch let error as AuthSessionError where error.idTokenCheck == .audience { … }
/// ```
public enum IDTokenCheck: String, Sendable, CaseIterable {
    /// The token is not a compact JWS of three base64url parts with JSON header and claims.
    case format
    /// The header's `alg` is not `RS256` (`none`, `HS256` and every other value are refused).
    case algorithm
    /// The header has no `kid`, or the tenant's JWKS has no key with that `kid` (after one
    /// refetch, at most one a minute).
    case keyID
    /// The JWKS key for the `kid` is not usable: `kty` not `RSA`, `alg` not `RS256`, `use`
    /// not `sig`, `key_ops` without `verify`, a public exponent that is even or 1, or a
    /// malformed, too short (under 2048 bits) or weak (ROCA, CVE-2017-15361) modulus.
    case signingKey
    /// The RS256 signature (PKCS#1 v1.5, SHA-256) does not verify.
    case signature
    /// `iss` is not the tenant's issuer URL (with its trailing slash).
    case issuer
    /// `sub` is missing or empty.
    case subject
    /// `aud` is missing or does not contain the client id.
    case audience
    /// `exp` is missing, or the token expired more than the leeway ago.
    case expiration
    /// `iat` is missing, or later than now plus the leeway.
    case issuedAt
    /// `nonce` is missing or not the one sent with the authorization request.
    case nonce
    /// `azp` is present and not the client id, or `aud` has several entries and `azp` is missing.
    case authorizedParty
    /// `max_age` was sent and `auth_time` is missing, or the sign-in is older than
    /// `max_age` plus the leeway.
    case authenticationTime
    /// `acr_values` were sent and `acr` is missing or not one of them.
    case authenticationContext

    /// One sentence on what the check requires (no token, no claim value).
    var summary: String {
        switch self {
        case .format: return "not a well-formed signed JWT."
        case .algorithm: return "only RS256 is accepted."
        case .keyID: return "no signing key with the token's kid in the tenant's key set."
        case .signingKey: return "the key for the token's kid is not an RS256 signing key."
        case .signature: return "the signature does not verify."
        case .issuer: return "the issuer is not the configured tenant."
        case .subject: return "the subject is missing."
        case .audience: return "the audience does not contain the client id."
        case .expiration: return "the token is expired."
        case .issuedAt: return "the issued-at time is missing or in the future."
        case .nonce: return "the nonce is not the one sent."
        case .authorizedParty: return "the authorized party is not the client id."
        case .authenticationTime: return "the sign-in is older than the requested max_age, or auth_time is missing."
        case .authenticationContext: return "the acr is missing or not one of the requested acr_values."
        }
    }
}
