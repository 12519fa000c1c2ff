import FoundationEssentials
import TokenStore

/// A compact JWS (`header.payload.signature`) split and decoded, not yet verified.
struct JSONWebToken: Sendable {
    /// The largest token accepted (an ID token is a few KiB).
    static let maximumBytes = 64 * 1024

    /// The JOSE header.
    let header: [String: JSONValue]
    /// The claims (payload).
    let claims: [String: JSONValue]
    /// `ASCII(header) || '.' || ASCII(payload)`: what the signature covers.
    let signingInput: [UInt8]
    /// The signature bytes.
    let signature: [UInt8]

    /// Decodes `token`; `nil` unless it is three base64url parts whose first two are JSON objects.
    init?(_ token: SecretBytes) {
        guard token.count > 0, token.count <= Self.maximumBytes else { return nil }
        let bytes = token.copyBytes()
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(String(decoding: parts[0], as: UTF8.self)),
            let claimBytes = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let signature = Base64URL.decode(String(decoding: parts[2], as: UTF8.self)),
            let header = Self.object(headerBytes),
            let claims = Self.object(claimBytes)
        else { return nil }
        self.header = header
        self.claims = claims
        self.signingInput = Array(bytes[..<parts[1].endIndex])
        self.signature = signature
    }

    private static func object(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else { return nil }
        return value.object
    }
}
