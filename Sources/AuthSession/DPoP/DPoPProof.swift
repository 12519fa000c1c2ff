/// Makes DPoP proofs (RFC 9449 4.2): a JWS whose header has `typ` `dpop+jwt`, `alg` ES256 and
/// the public `jwk`, and whose claims are `jti` (fresh each proof), `htm`, `htu` (the URL
/// without query and fragment), `iat`, and `nonce` and `ath` when given.
package enum DPoPProof {
    /// The compact JWS of one proof for `method` on `url`, signed by `key`.
    /// - Parameters:
    ///   - nonce: the server's latest `DPoP-Nonce`, when one is known.
    ///   - accessToken: for a request to a resource server: `ath` is its base64url SHA-256.
    ///   - issuedAt: `iat`, seconds since 1970.
    ///   - jti: the proof's id; a new random one unless a test fixes it.
    package static func make(
        key: DPoPKey, method: String, url: String, nonce: String? = nil, accessToken: String? = nil,
        issuedAt: Int64, jti: String = SignInRandom.token()
    ) throws(DPoPKey.Failure) -> String {
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWK)}"
        var claims = "{\"jti\":\(jsonString(jti)),\"htm\":\(jsonString(method)),\"htu\":\(jsonString(htu(url))),\"iat\":\(issuedAt)"
        if let nonce { claims += ",\"nonce\":\(jsonString(nonce))" }
        if let accessToken { claims += ",\"ath\":\"\(accessTokenHash(accessToken))\"" }
        claims += "}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `url` without its query and fragment (RFC 9449 4.2: `htu`).
    package static func htu(_ url: String) -> String {
        if let cut = url.firstIndex(where: { $0 == "?" || $0 == "#" }) { return String(url[..<cut]) }
        return url
    }

    /// `ath`: base64url of the SHA-256 of the access token's ASCII bytes.
    package static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(SHA256Digest.hash(Array(accessToken.utf8)))
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
