import FoundationEssentials
import TokenStore

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
        key: any DPoPSigningKey, method: String, url: String, nonce: String? = nil, accessToken: String? = nil,
        issuedAt: Int64, jti: String = SignInRandom.token()
    ) throws(DPoPSigningFailure) -> String {
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWK)}"
        var claims = "{\"jti\":\(JSONText.quoted(jti)),\"htm\":\(JSONText.quoted(method)),\"htu\":\(JSONText.quoted(htu(url))),\"iat\":\(issuedAt)"
        if let nonce { claims += ",\"nonce\":\(JSONText.quoted(nonce))" }
        if let accessToken { claims += ",\"ath\":\"\(accessTokenHash(accessToken))\"" }
        claims += "}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `url` as a proof names it (RFC 9449 4.2: `htu`): without query, fragment and user
    /// information, scheme and host in lower case and the scheme's default port dropped
    /// (RFC 3986 6.2.2–6.2.3), so that a server comparing it with its own URL finds them equal.
    package static func htu(_ url: String) -> String {
        var cut = url
        if let end = url.firstIndex(where: { $0 == "?" || $0 == "#" }) { cut = String(url[..<end]) }
        guard var components = URLComponents(string: cut), let scheme = components.scheme?.lowercased(),
            let host = components.percentEncodedHost, !host.isEmpty
        else { return cut }
        components.scheme = scheme
        components.percentEncodedHost = host.lowercased()
        components.user = nil
        components.password = nil
        if components.port == defaultPort(scheme) { components.port = nil }
        return components.string ?? cut
    }

    /// `scheme://host[:port]` of `url`, normalised as ``htu(_:)``: what a server's nonce is kept under.
    package static func origin(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let host = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedHost ?? url.host ?? "").lowercased()
        let port = url.port.flatMap { $0 == defaultPort(scheme) ? nil : $0 }
        return "\(scheme)://\(host)\(port.map { ":\($0)" } ?? "")"
    }

    private static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "https": return 443
        case "http": return 80
        default: return nil
        }
    }

    /// `ath`: base64url of the SHA-256 of the access token's ASCII bytes.
    package static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(SHA256Digest.hash(Array(accessToken.utf8)))
    }
}
