import CCrypto
import Foundation
import TokenStore

@testable import AuthSession

/// An RSA key made by libcrypto for the ID-token tests, signing RS256 tokens.
// @unchecked Sendable: the EVP_PKEY is never changed after init; each signature uses its own context.
final class TestRSAKey: @unchecked Sendable {
    let key: OpaquePointer
    let modulus: [UInt8]
    let exponent: [UInt8]

    init(bits: Int32 = 2048) {
        let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil)!
        defer { EVP_PKEY_CTX_free(context) }
        precondition(EVP_PKEY_keygen_init(context) == 1)
        precondition(EVP_PKEY_CTX_set_rsa_keygen_bits(context, bits) == 1)
        var made: OpaquePointer?
        precondition(EVP_PKEY_generate(context, &made) == 1)
        key = made!
        modulus = Self.parameter("n", of: made!)
        exponent = Self.parameter("e", of: made!)
    }

    deinit { EVP_PKEY_free(key) }

    private static func parameter(_ name: String, of key: OpaquePointer) -> [UInt8] {
        var number: OpaquePointer?
        precondition(EVP_PKEY_get_bn_param(key, name, &number) == 1)
        defer { BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int(BN_num_bits(number) + 7) / 8)
        _ = bytes.withUnsafeMutableBufferPointer { BN_bn2bin(number, $0.baseAddress) }
        return bytes
    }

    /// RSASSA-PKCS1-v1_5 with SHA-256.
    func sign(_ message: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit_ex(context, nil, "SHA256", nil, nil, key, nil) == 1)
        var length = 0
        precondition(EVP_DigestSign(context, nil, &length, message, message.count) == 1)
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        return Array(signature[0..<length])
    }

    /// This key as a JWK.
    func jwk(kid: String, kty: String = "RSA", alg: String? = "RS256", use: String? = "sig") -> [String: Any] {
        var fields: [String: Any] = [
            "kid": kid, "kty": kty, "n": Base64URL.encode(modulus), "e": Base64URL.encode(exponent),
        ]
        if let alg { fields["alg"] = alg }
        if let use { fields["use"] = use }
        return fields
    }
}

/// HMAC-SHA256 (for the HS256 algorithm-confusion case).
func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
    var output = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &output, &length)
    return Array(output[0..<Int(length)])
}

/// Builds compact JWS tokens.
enum TestToken {
    static func json(_ object: [String: Any]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    /// `header.claims.signature`, the signature made over the first two parts by `sign`.
    static func make(header: [String: Any], claims: [String: Any], sign: ([UInt8]) -> [UInt8]) -> String {
        let input = Base64URL.encode(json(header)) + "." + Base64URL.encode(json(claims))
        return input + "." + Base64URL.encode(sign(Array(input.utf8)))
    }
}

/// An in-memory HTTPTransport serving key sets in turn (the last one again once they run out),
/// counting requests. A legitimate unit-test fake: the real OIDC test server is built elsewhere.
final class KeySetTransport: HTTPTransport, @unchecked Sendable {  // mutable state under `lock`
    enum Answer {
        case document([String: Any])
        case status(Int, String)
        case failure(TransportFailure.Kind)
    }

    private let lock = NSLock()
    private var answers: [Answer]
    private var urls: [URL] = []

    init(_ answers: [Answer]) { self.answers = answers }

    convenience init(keys: [[String: Any]]) { self.init([.document(["keys": keys])]) }

    var requests: [URL] { lock.withLock { urls } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let answer: Answer = lock.withLock {
            urls.append(request.url)
            return answers.count > 1 ? answers.removeFirst() : answers[0]
        }
        switch answer {
        case .document(let document):
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(TestToken.json(document)))
        case .status(let status, let body):
            return HTTPResponse(status: status, body: Data(body.utf8))
        case .failure(let kind):
            throw TransportFailure(kind, "test failure")
        }
    }
}
