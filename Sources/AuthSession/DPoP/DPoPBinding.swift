import FoundationEssentials
import TokenStore

/// A client's DPoP binding (RFC 9449): the key every token request proves and the latest
/// `DPoP-Nonce` each server gave, keyed by the endpoint's origin. A copy of a client shares
/// it (a class), so the nonce learned by one request serves the next without a 400 first.
/// The nonce is kept in this process only for now (sharing it between processes through the
/// store is the next step of issue 27).
package final class DPoPBinding: Sendable {
    /// The key whose thumbprint the server binds the tokens to.
    package let key: DPoPKey
    private let nonces = Locked<[String: String]>([:])
    /// The clock of `iat` (seconds since 1970); a test may fix it.
    private let now: @Sendable () -> Int64

    /// A binding to `key`.
    package init(key: DPoPKey, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.key = key
        self.now = now
    }

    /// The latest nonce `url`'s server gave, if any.
    package func nonce(for url: URL) -> String? {
        let origin = Self.origin(url)
        return nonces.withLock { $0[origin] }
    }

    /// Keeps `nonce` as the one to send `url`'s server next.
    package func record(nonce: String, for url: URL) {
        let origin = Self.origin(url)
        nonces.withLock { $0[origin] = nonce }
    }

    /// A fresh proof (new `jti`) for `method` on `url` with the server's latest nonce.
    package func proof(method: String, url: URL, accessToken: String? = nil) throws(DPoPKey.Failure) -> String {
        try DPoPProof.make(
            key: key, method: method, url: url.absoluteString, nonce: nonce(for: url), accessToken: accessToken,
            issuedAt: now())
    }

    private static func origin(_ url: URL) -> String {
        "\(url.scheme ?? "")://\(url.host ?? "")\(url.port.map { ":\($0)" } ?? "")"
    }
}

/// The answer RFC 9449 8 defines: 400 (401 from a resource server) with the OAuth error
/// `use_dpop_nonce` and the nonce to use in `DPoP-Nonce`.
enum DPoPNonceAnswer {
    /// True when `response` asks for the request again with the nonce it carries.
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        guard response.status == 400 || response.status == 401, let nonce = response.headers["DPoP-Nonce"], !nonce.isEmpty
        else { return false }
        return ResponseClassifier.jsonObject(response.body)?["error"]?.string == "use_dpop_nonce"
    }
}
