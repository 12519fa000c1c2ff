@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// DPoP proofs (RFC 9449, issue 27 item 3): the ES256 key and the proof maker, each proof
/// verified by the test authorization server's independent implementation
/// (Tests/AuthServer/dpop.py, Python `cryptography`), not by the code that made it.
@Suite("DPoP proofs: ES256 key, proof shape, verified by the test server", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPProofTests {
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    @Test("a proof verifies at the server: typ, alg, jwk, jti, htm, htu without query and fragment, iat, nonce, ath; r‖s signature")
    func proofVerifiesAtTheServer() async throws {
        try await AuthorizationServerClientTests.withServer { server in
            let key = try DPoPKey.generate()
            let url = server.baseURL.absoluteString + "/userinfo"
            let proof = try DPoPProof.make(
                key: key, method: "GET", url: url + "?page=2#top", nonce: "n-1", accessToken: "at-123", issuedAt: Self.now())
            let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
            #expect(parts.count == 3)
            #expect(Base64URL.decode(parts[2])?.count == 64, "raw r‖s, not DER")
            let verdict = try server.checkDPoPProof(proof, method: "GET", url: url, accessToken: "at-123")
            #expect(verdict.error == nil, "\(verdict.description ?? "")")
            #expect(verdict.jkt == key.thumbprint, "the server's RFC 7638 thumbprint is ours")
            #expect(verdict.header["typ"] as? String == "dpop+jwt")
            #expect(verdict.header["alg"] as? String == "ES256")
            let jwk = verdict.header["jwk"] as? [String: Any] ?? [:]
            #expect(Set(jwk.keys) == ["kty", "crv", "x", "y"], "the public key only")
            #expect(verdict.claims["htu"] as? String == url)
            #expect(verdict.claims["htm"] as? String == "GET")
            #expect(verdict.claims["nonce"] as? String == "n-1")
            #expect(verdict.claims["ath"] as? String == Base64URL.encode(SHA256Digest.hash(Array("at-123".utf8))))
            #expect((verdict.claims["jti"] as? String)?.isEmpty == false)
            // the same proof again is a replay; another access token's ath is refused
            #expect(try server.checkDPoPProof(proof, method: "GET", url: url, accessToken: "at-123").error == "invalid_dpop_proof")
            let other = try DPoPProof.make(key: key, method: "GET", url: url, accessToken: "at-123", issuedAt: Self.now())
            #expect(try server.checkDPoPProof(other, method: "GET", url: url, accessToken: "at-456").error == "invalid_dpop_proof")
        }
    }

    @Test("every proof has a fresh jti; a key rebuilt from its sealed scalar and point signs as the same key")
    func freshJTIAndRebuiltKey() async throws {
        try await AuthorizationServerClientTests.withServer { server in
            let key = try DPoPKey.generate()
            let url = server.tokenURL.absoluteString
            var jtis = Set<String>()
            for _ in 0..<20 {
                let proof = try DPoPProof.make(key: key, method: "POST", url: url, issuedAt: Self.now())
                let verdict = try server.checkDPoPProof(proof, method: "POST", url: url)
                #expect(verdict.error == nil, "\(verdict.description ?? "")")
                if let jti = verdict.claims["jti"] as? String { jtis.insert(jti) }
            }
            #expect(jtis.count == 20)
            var scalar = try key.privateScalar()
            #expect(scalar.count == 32)
            let rebuilt = try DPoPKey(privateScalar: scalar, publicPoint: key.publicPoint)
            #expect(rebuilt.thumbprint == key.thumbprint && rebuilt.publicJWK == key.publicJWK)
            let proof = try DPoPProof.make(key: rebuilt, method: "POST", url: url, issuedAt: Self.now())
            #expect(try server.checkDPoPProof(proof, method: "POST", url: url).jkt == key.thumbprint)
            // a point that is not the scalar's, and material of the wrong size, are refused
            let another = try DPoPKey.generate()
            #expect(throws: DPoPKey.Failure.self) { try DPoPKey(privateScalar: scalar, publicPoint: another.publicPoint) }
            #expect(throws: DPoPKey.Failure.self) { try DPoPKey(privateScalar: Array(scalar.prefix(31)), publicPoint: key.publicPoint) }
            for i in scalar.indices { scalar[i] = 0 }
        }
    }

    @Test("htu drops query and fragment; DER to r‖s pads short integers and refuses other shapes")
    func htuAndSignatureShape() {
        #expect(DPoPProof.htu("https://a.example/p?q=1#f") == "https://a.example/p")
        #expect(DPoPProof.htu("https://a.example/p#f?x") == "https://a.example/p")
        #expect(DPoPProof.htu("https://a.example/p") == "https://a.example/p")
        // r = 0x00 0x80.. (33 bytes, a leading zero), s = 0x01 (1 byte)
        let r: [UInt8] = [0x00, 0x80] + [UInt8](repeating: 0x11, count: 31)
        let der: [UInt8] = [0x30, UInt8(2 + r.count + 3), 0x02, UInt8(r.count)] + r + [0x02, 0x01, 0x01]
        let raw = DPoPKey.rawSignature(der: der[...])
        #expect(raw == Array(r.dropFirst()) + [UInt8](repeating: 0, count: 31) + [0x01])
        #expect(DPoPKey.rawSignature(der: [0x30, 0x03, 0x02, 0x01, 0x01][...]) == nil, "one integer only")
        #expect(DPoPKey.rawSignature(der: (der + [0x00])[...]) == nil, "trailing bytes")
        #expect(JSONText.quoted("a\"b\\c\n\u{01}") == "\"a\\\"b\\\\c\\n\\u0001\"")
    }
}
