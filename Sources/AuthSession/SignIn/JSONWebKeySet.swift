import FoundationEssentials

/// One key of a JSON Web Key Set (RFC 7517), with the fields the RS256 check reads.
struct JSONWebKey: Sendable, Equatable {
    /// `kid`.
    let keyID: String
    /// `kty`, such as `RSA`.
    let keyType: String?
    /// `alg`, when present.
    let algorithm: String?
    /// `use`, when present.
    let use: String?
    /// `n` (base64url), for RSA.
    let modulus: String?
    /// `e` (base64url), for RSA.
    let exponent: String?

    /// The smallest RSA modulus accepted.
    static let minimumRSABits = 2048

    /// The RS256 verification key, or `nil` when this key is not one: `kty` not `RSA`, `alg`
    /// other than `RS256`, `use` other than `sig`, a malformed `n`/`e`, or a modulus under
    /// 2048 bits.
    func rs256Key() -> RSAPublicKey? {
        guard keyType == "RSA", algorithm == nil || algorithm == "RS256", use == nil || use == "sig",
            let modulus = modulus.flatMap(Base64URL.decode), let exponent = exponent.flatMap(Base64URL.decode),
            exponent.count <= 8, let key = RSAPublicKey(modulus: modulus, exponent: exponent),
            key.bits >= Self.minimumRSABits
        else { return nil }
        return key
    }
}

/// A JSON Web Key Set as served at `{issuer}.well-known/jwks.json`.
enum JSONWebKeySet {
    /// The keys of `body` by `kid` (keys without a `kid` cannot be chosen and are left out;
    /// for a repeated `kid` the first key wins), or `nil` when `body` is not a JWKS.
    static func keys(in body: Data) -> [String: JSONWebKey]? {
        guard let document = try? JSONDecoder().decode(JSONValue.self, from: body),
            case .array(let entries)? = document.object?["keys"]
        else { return nil }
        var keys: [String: JSONWebKey] = [:]
        for entry in entries {
            guard let fields = entry.object, let keyID = fields["kid"]?.string, !keyID.isEmpty,
                keys[keyID] == nil
            else { continue }
            keys[keyID] = JSONWebKey(
                keyID: keyID, keyType: fields["kty"]?.string, algorithm: fields["alg"]?.string, use: fields["use"]?.string,
                modulus: fields["n"]?.string, exponent: fields["e"]?.string)
        }
        return keys
    }
}
