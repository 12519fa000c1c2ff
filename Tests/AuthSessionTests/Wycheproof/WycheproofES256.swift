import Foundation
import TestSupport
import TokenStore

@testable import AuthSession

/// ES256 (ECDSA P-256 SHA-256, r‖s as JWS has it) through the verifier that checks every DPoP
/// proof in the test suite: the test authorization server's `dpop.verify_es256`
/// (Tests/AuthServer/dpop.py, OpenSSL through Python `cryptography`), driven in bulk by
/// Tests/AuthServer/es256_verify.py. The library itself verifies no ES256 signature of another
/// party (DPoPKey checks only its own key pair at import, in DER form), so this verifier is the one
/// the vectors can check, and the one that judges the signers' output below.
enum WycheproofES256 {
    /// The test server's Python (scripts/authserver venv), as ``AuthorizationServer`` finds it.
    static var python: String {
        ProcessInfo.processInfo.environment["TOKENSTORE_AUTHSERVER_PYTHON"]
            ?? repositoryRoot.appendingPathComponent(".build/authserver-venv/bin/python").path
    }

    static var script: String { repositoryRoot.appendingPathComponent("Tests/AuthServer/es256_verify.py").path }

    /// One signature to judge: by the key `jwk` (kty, crv, x, y), over `message`.
    struct Check {
        let jwk: [String: String]
        let message: [UInt8]
        let signature: [UInt8]
    }

    /// The server's verdict on each check: "valid", "invalid", or "key: …" (the JWK refused).
    static func verdicts(_ checks: [Check]) throws -> [String] {
        let payload = checks.map { ["jwk": $0.jwk, "msg": Wycheproof.hex($0.message), "sig": Wycheproof.hex($0.signature)] }
        let run = try ChildProcess.run(
            python, [script], input: try JSONSerialization.data(withJSONObject: payload), timeout: .seconds(300))
        guard run.termination.succeeded else {
            throw WycheproofRunners.BadVector(description: "es256_verify.py: \(run.termination) \(run.standardErrorText)")
        }
        guard let verdicts = try JSONSerialization.jsonObject(with: Data(run.standardOutput)) as? [String],
            verdicts.count == checks.count
        else { throw WycheproofRunners.BadVector(description: "es256_verify.py answered \(run.standardOutputText.prefix(200))") }
        return verdicts
    }

    /// A group's public key as a JWK: its `publicKeyJwk`, or (groups without one) made from the
    /// uncompressed point.
    static func jwk(_ group: [String: Any]) throws -> [String: String] {
        if let jwk = group["publicKeyJwk"] as? [String: Any] {
            return ["kty", "crv", "x", "y"].reduce(into: [:]) { $0[$1] = jwk[$1] as? String }
        }
        guard let key = group["publicKey"] as? [String: Any], let text = key["uncompressed"] as? String,
            let point = Wycheproof.bytes(hex: text), point.count == 65, point[0] == 0x04
        else { throw WycheproofRunners.BadVector(description: "an ECDSA group without a public key") }
        return ["kty": "EC", "crv": "P-256", "x": Base64URL.encode(point[1..<33]), "y": Base64URL.encode(point[33..<65])]
    }

    /// ecdsa_secp256r1_sha256_p1363_test.json: every case's message and r‖s signature by its
    /// group's key through the server's verifier.
    static func p1363(_ file: Wycheproof.File) throws -> WycheproofTally {
        var checks: [Check] = []
        var vectors: [WycheproofRunners.Case] = []
        for group in file.groups {
            let key = try jwk(group)
            for vector in WycheproofRunners.cases(group) {
                checks.append(
                    Check(
                        jwk: key, message: try WycheproofRunners.bytes(vector, "msg"),
                        signature: try WycheproofRunners.bytes(vector, "sig")))
                vectors.append(vector)
            }
        }
        var tally = WycheproofTally(file: file.name)
        for (vector, verdict) in zip(vectors, try verdicts(checks)) {
            tally.record(
                id: WycheproofRunners.id(vector), result: WycheproofRunners.result(vector), flags: WycheproofRunners.flags(vector),
                accepted: verdict == "valid", note: verdict)
        }
        return tally
    }

    /// The messages of the P1363 file (every case's, repeats included): what the signers sign.
    static func messages(_ file: Wycheproof.File) throws -> [[UInt8]] {
        try file.groups.flatMap(WycheproofRunners.cases).map { try WycheproofRunners.bytes($0, "msg") }
    }

    /// What the server said of a signer's output.
    struct SignerFigures: CustomStringConvertible {
        var signatures = 0
        /// Signatures the verifier accepted.
        var verified = 0
        /// The same signatures with one bit flipped (a bit of r or of s in turn), refused.
        var tamperedRefused = 0
        /// r or s under 2^248 (a leading zero byte: the DER → r‖s conversion padded it).
        var shortIntegers = 0
        /// r or s of 2^255 or more (DER needs a leading zero there, which the conversion dropped).
        var highBitIntegers = 0
        var failures: [String] = []

        var description: String {
            "signatures=\(signatures) verified=\(verified) tampered_refused=\(tamperedRefused) "
                + "short_integers=\(shortIntegers) high_bit_integers=\(highBitIntegers)"
        }
    }

    /// Each of `messages` signed by `sign` (r‖s, 64 bytes) and judged with the key `publicJWK`;
    /// each signature also judged with one bit flipped, which must be refused.
    static func judgeSigner(
        publicJWK: String, messages: [[UInt8]], sign: ([UInt8]) throws -> [UInt8]
    ) throws -> SignerFigures {
        guard let object = try JSONSerialization.jsonObject(with: Data(publicJWK.utf8)) as? [String: String] else {
            throw WycheproofRunners.BadVector(description: "the signer's JWK is not a JSON object of strings")
        }
        var figures = SignerFigures()
        var checks: [Check] = []
        for (index, message) in messages.enumerated() {
            let signature = try sign(message)
            guard signature.count == 64 else {
                figures.failures.append("signature \(index) is \(signature.count) bytes, not r‖s")
                continue
            }
            figures.signatures += 1
            for half in [signature[0..<32], signature[32..<64]] {
                if half.first == 0 { figures.shortIntegers += 1 }
                if half.first! >= 0x80 { figures.highBitIntegers += 1 }
            }
            var tampered = signature
            tampered[(index * 7) % 64] ^= UInt8(1) << UInt8(index % 8)
            checks += [
                Check(jwk: object, message: message, signature: signature),
                Check(jwk: object, message: message, signature: tampered),
            ]
        }
        let verdicts = try verdicts(checks)
        for pair in stride(from: 0, to: verdicts.count, by: 2) {
            if verdicts[pair] == "valid" { figures.verified += 1 } else { figures.failures.append("signature \(pair / 2): \(verdicts[pair])") }
            if verdicts[pair + 1] == "invalid" {
                figures.tamperedRefused += 1
            } else {
                figures.failures.append("tampered signature \(pair / 2): \(verdicts[pair + 1])")
            }
        }
        return figures
    }
}
