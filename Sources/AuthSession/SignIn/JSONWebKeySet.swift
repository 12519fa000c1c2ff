import FoundationEssentials
import TokenStore

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
    /// `key_ops`, when present (a member that is not an array of strings reads as no operation).
    var operations: [String]? = nil

    /// The smallest RSA modulus accepted.
    static let minimumRSABits = 2048

    /// The RS256 verification key, or `nil` when this key is not one: `kty` not `RSA`, `alg`
    /// other than `RS256`, `use` other than `sig`, `key_ops` without `verify`, a malformed
    /// `n`/`e`, an even public exponent or 1 (with 1 the "signature" is the padded digest
    /// itself), a modulus under 2048 bits, or one with the ROCA fingerprint (``ROCAFingerprint``).
    func rs256Key() -> RSAPublicKey? {
        guard keyType == "RSA", algorithm == nil || algorithm == "RS256", use == nil || use == "sig",
            operations.map({ $0.contains("verify") }) ?? true,
            let modulus = modulus.flatMap(Base64URL.decode), let exponent = exponent.flatMap(Base64URL.decode),
            exponent.count <= 8, Self.isUsableExponent(exponent), !ROCAFingerprint.matches(modulus: modulus),
            let key = RSAPublicKey(modulus: modulus, exponent: exponent), key.bits >= Self.minimumRSABits
        else { return nil }
        return key
    }

    /// An RSA public exponent is odd and more than 1 (big-endian bytes).
    static func isUsableExponent(_ exponent: [UInt8]) -> Bool {
        guard let last = exponent.last, last & 1 == 1 else { return false }
        return last > 1 || exponent.dropLast().contains { $0 != 0 }
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
            var operations: [String]?
            if let listed = fields["key_ops"] {
                if case .array(let entries) = listed { operations = entries.compactMap(\.string) } else { operations = [] }
            }
            keys[keyID] = JSONWebKey(
                keyID: keyID, keyType: fields["kty"]?.string, algorithm: fields["alg"]?.string, use: fields["use"]?.string,
                modulus: fields["n"]?.string, exponent: fields["e"]?.string, operations: operations)
        }
        return keys
    }
}
