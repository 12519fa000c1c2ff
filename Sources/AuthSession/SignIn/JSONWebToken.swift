import FoundationEssentials
import TokenStore

/// A compact JWS (`header.payload.signature`, RFC 7515 7.1) split and decoded, not yet verified;
/// the payload is bytes, whatever they are (``JSONWebToken`` reads them as claims).
struct JSONWebSignature: Sendable {
    /// The largest token accepted (an ID token is a few KiB).
    static let maximumBytes = 64 * 1024

    /// The JOSE header.
    let header: [String: JSONValue]
    /// The payload, decoded from base64url.
    let payload: [UInt8]
    /// `ASCII(header) || '.' || ASCII(payload)`: what the signature covers.
    let signingInput: [UInt8]
    /// The signature bytes.
    let signature: [UInt8]

    /// Decodes `bytes`; `nil` unless it is three base64url parts whose first is a JSON object
    /// naming no critical extension (`crit`: this code understands none, RFC 7515 4.1.11).
    init?(compact bytes: [UInt8]) {
        guard !bytes.isEmpty, bytes.count <= Self.maximumBytes else { return nil }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(String(decoding: parts[0], as: UTF8.self)),
            let payload = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let signature = Base64URL.decode(String(decoding: parts[2], as: UTF8.self)),
            let header = Self.object(headerBytes), header["crit"] == nil
        else { return nil }
        self.header = header
        self.payload = payload
        self.signingInput = Array(bytes[..<parts[1].endIndex])
        self.signature = signature
    }

    /// The JSON object `bytes` hold, or `nil`.
    static func object(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else { return nil }
        return value.object
    }
}

/// A JWT: a compact JWS whose payload is a JSON object of claims, split and decoded, not yet verified.
struct JSONWebToken: Sendable {
    /// The JWS it is.
    let jws: JSONWebSignature
    /// The claims (payload).
    let claims: [String: JSONValue]

    /// The JOSE header.
    var header: [String: JSONValue] { jws.header }
    /// `ASCII(header) || '.' || ASCII(payload)`: what the signature covers.
    var signingInput: [UInt8] { jws.signingInput }
    /// The signature bytes.
    var signature: [UInt8] { jws.signature }

    /// Decodes `token`; `nil` unless it is a ``JSONWebSignature`` whose payload is a JSON object.
    init?(_ token: SecretBytes) {
        guard token.count > 0, token.count <= JSONWebSignature.maximumBytes,
            let jws = JSONWebSignature(compact: token.copyBytes()), let claims = JSONWebSignature.object(jws.payload)
        else { return nil }
        self.jws = jws
        self.claims = claims
    }
}
