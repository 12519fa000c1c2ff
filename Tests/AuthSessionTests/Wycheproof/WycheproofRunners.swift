import Foundation
import TestSupport
import TokenStore

@testable import AuthSession

/// Each Wycheproof file through the code that uses its primitive, one ``WycheproofTally`` a file.
enum WycheproofRunners {
    typealias Case = [String: Any]

    struct BadVector: Error, CustomStringConvertible {
        let description: String
    }

    static func cases(_ group: [String: Any]) -> [Case] { group["tests"] as? [Case] ?? [] }
    static func id(_ vector: Case) -> Int { vector["tcId"] as? Int ?? -1 }
    static func result(_ vector: Case) -> String { vector["result"] as? String ?? "?" }
    static func flags(_ vector: Case) -> [String] { vector["flags"] as? [String] ?? [] }

    static func bytes(_ vector: Case, _ field: String) throws -> [UInt8] {
        guard let text = vector[field] as? String, let bytes = Wycheproof.bytes(hex: text) else {
            throw BadVector(description: "tcId \(id(vector)): no hex \(field)")
        }
        return bytes
    }

    /// `jwk` (one JWK, or a JWK Set) as the tenant's key set, through the parser the key-set
    /// cache uses (``JSONWebKeySet/keys(in:)``); empty when it is not a key set.
    static func keySet(_ jwk: Any?) throws -> [String: JSONWebKey] {
        guard let object = jwk as? [String: Any] else { return [:] }
        let set: [String: Any] = object["keys"] != nil ? object : ["keys": [object]]
        return JSONWebKeySet.keys(in: try JSONSerialization.data(withJSONObject: set)) ?? [:]
    }

    /// What the failure says: the ID-token check, or the error's code.
    static func note(_ error: AuthSessionError) -> String { error.idTokenCheck.map { "at \($0.rawValue)" } ?? "\(error.code)" }

    // MARK: - RSASSA-PKCS1-v1_5 2048 / SHA-256: the validator's key and signature steps

    /// Each group's `keyJwk` made the tenant's key set, each case's message and signature through
    /// ``IDTokenValidator/verifyRS256(_:of:with:)`` (what ``IDTokenValidator/verifySignature(_:key:)``
    /// calls with a token's signing input).
    static func rsaPKCS1(_ file: Wycheproof.File) throws -> WycheproofTally {
        var tally = WycheproofTally(file: file.name)
        for group in file.groups {
            guard let jwk = group["keyJwk"] as? [String: Any], let kid = jwk["kid"] as? String else {
                throw BadVector(description: "an RSA group without keyJwk")
            }
            let key = try keySet(jwk)[kid]
            for vector in cases(group) {
                let message = try bytes(vector, "msg"), signature = try bytes(vector, "sig")
                var accepted = false, note = "the key set has no key \(kid)"
                if let key {
                    do throws(AuthSessionError) {
                        try IDTokenValidator.verifyRS256(signature, of: message, with: key)
                        (accepted, note) = (true, "the signature verified")
                    } catch {
                        note = Self.note(error)
                    }
                }
                tally.record(id: id(vector), result: result(vector), flags: flags(vector), accepted: accepted, note: note)
            }
        }
        return tally
    }

    // MARK: - JWS and JWK: the validator's parsing and signature steps

    /// Each case's JWS (a compact one, or a JSON serialization as its text) parsed as the
    /// validator parses a token (``JSONWebSignature``) and verified as it verifies one
    /// (``IDTokenValidator/verifySignature(_:key:)``) against the group's key set (`public`, else
    /// `private`: an HMAC key is only there). A case whose header names an algorithm other than
    /// RS256 is one the validator never accepts: its refusal is counted apart.
    static func jws(_ file: Wycheproof.File) async throws -> WycheproofTally {
        var tally = WycheproofTally(file: file.name)
        for group in file.groups {
            let keys = try keySet(group["public"] ?? group["private"])
            for vector in cases(group) {
                let text: [UInt8]
                if let compact = vector["jws"] as? String {
                    text = Array(compact.utf8)
                } else {
                    text = Array(try JSONSerialization.data(withJSONObject: vector["jws"] ?? [:]))
                }
                let algorithm = declaredAlgorithm(text)
                var accepted = false, note = "at format"  // until parsed
                if let token = JSONWebSignature(compact: text) {
                    do throws(AuthSessionError) {
                        try await IDTokenValidator.verifySignature(token) { keys[$0] }
                        (accepted, note) = (true, "the signature verified")
                    } catch {
                        note = Self.note(error)
                    }
                }
                tally.record(
                    id: id(vector), result: result(vector), flags: flags(vector), accepted: accepted,
                    unsupportedAlgorithm: algorithm != nil && algorithm != IDTokenValidator.algorithm,
                    note: "\(note) (alg \(algorithm ?? "absent"))")
            }
        }
        return tally
    }

    /// The `alg` a JWS's header names, read leniently (characters outside base64url dropped), or
    /// nil: only to class a case by its algorithm, never to decide its verdict.
    static func declaredAlgorithm(_ text: [UInt8]) -> String? {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var base64 = String(decoding: text.prefix { $0 != UInt8(ascii: ".") }.filter(alphabet.contains), as: UTF8.self)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let header = Data(base64Encoded: base64),
            let object = try? JSONSerialization.jsonObject(with: header) as? [String: Any]
        else { return nil }
        return object["alg"] as? String
    }

    // MARK: - XChaCha20-Poly1305: the AEAD the envelope seals every value with

    /// Each case through ``XChaCha20Poly1305`` (what ``Sealer`` and the key wrappers call): a
    /// valid case must seal to the vector's ciphertext ‖ tag and open to its message; an invalid
    /// one must not open (and, with a nonce of the wrong size, not seal either).
    static func xchacha20Poly1305(_ file: Wycheproof.File) throws -> WycheproofTally {
        var tally = WycheproofTally(file: file.name)
        for group in file.groups {
            for vector in cases(group) {
                let key = try bytes(vector, "key"), nonce = try bytes(vector, "iv"), ad = try bytes(vector, "aad")
                let message = try bytes(vector, "msg"), sealed = try bytes(vector, "ct") + bytes(vector, "tag")
                var output = [UInt8](repeating: 0, count: message.count + XChaCha20Poly1305.tagBytes)
                let sealedOK = message.withUnsafeBytes { message in
                    ad.withUnsafeBytes { ad in
                        nonce.withUnsafeBytes { nonce in
                            key.withUnsafeBytes { key in
                                output.withUnsafeMutableBytes {
                                    XChaCha20Poly1305.seal(message, associatedData: ad, nonce: nonce, key: key, into: $0)
                                }
                            }
                        }
                    }
                }
                var opened = [UInt8](repeating: 0, count: max(sealed.count - XChaCha20Poly1305.tagBytes, 0))
                let openedOK = sealed.withUnsafeBytes { sealed in
                    ad.withUnsafeBytes { ad in
                        nonce.withUnsafeBytes { nonce in
                            key.withUnsafeBytes { key in
                                opened.withUnsafeMutableBytes {
                                    XChaCha20Poly1305.open(sealed, associatedData: ad, nonce: nonce, key: key, into: $0)
                                }
                            }
                        }
                    }
                }
                let accepted: Bool
                var note = "seal \(sealedOK ? (output == sealed ? "gave the vector's bytes" : "gave other bytes") : "refused"), "
                    + "open \(openedOK ? (opened == message ? "gave the message" : "gave other bytes") : "refused")"
                if result(vector) == "valid" {
                    accepted = sealedOK && output == sealed && openedOK && opened == message
                } else {
                    // Refused: it does not open; a nonce of the wrong size seals nothing either.
                    let nonceRefused = nonce.count == XChaCha20Poly1305.nonceBytes || !sealedOK
                    accepted = openedOK || !nonceRefused
                    if !nonceRefused { note += " (a wrong-sized nonce sealed)" }
                }
                tally.record(id: id(vector), result: result(vector), flags: flags(vector), accepted: accepted, note: note)
            }
        }
        return tally
    }
}
