import FoundationEssentials
import TokenStore

/// A client's DPoP binding (RFC 9449): the key every token request proves and the latest
/// `DPoP-Nonce` each server gave, keyed by the endpoint's origin. A copy of a client shares
/// it (a class), so the nonce learned by one request serves the next without a 400 first.
/// With a `store`, the latest nonce of each origin is also kept in the store (sealed), so
/// another process of the same store starts with it: ``sharedProof(method:url:accessToken:)``
/// reads the store's when this process has none for the origin, ``recordShared(nonce:for:)``
/// writes each new one (last writer wins).
package final class DPoPBinding: Sendable {
    /// The key whose thumbprint the server binds the tokens to.
    package let key: any DPoPSigningKey
    /// The store the nonces are shared through, if any.
    package let store: TokenStore?
    private let nonces = Locked<[String: String]>([:])
    /// The clock of `iat` (seconds since 1970); a test may fix it.
    private let now: @Sendable () -> Int64

    /// A binding to `key`, sharing its nonces through `store` when given.
    package init(
        key: any DPoPSigningKey, store: TokenStore? = nil,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.key = key
        self.store = store
        self.now = now
    }

    /// A fresh proof as ``proof(method:url:accessToken:)``, with the store's nonce for `url`'s
    /// origin when this process has none (a store that cannot be read gives none: the server
    /// then asks for one).
    package func sharedProof(method: String, url: URL, accessToken: String? = nil) async throws(DPoPSigningFailure) -> String {
        if let store, nonce(for: url) == nil, let stored = try? await StoreWork.perform(on: store, { [origin = Self.origin(url)] in try $0.dpopNonce(origin: origin) }) {
            nonces.withLock { if $0[Self.origin(url)] == nil { $0[Self.origin(url)] = stored } }
        }
        return try await offPoolProof(method: method, url: url, accessToken: accessToken)
    }

    /// ``proof(method:url:accessToken:)`` from async code: a TPM-resident key signs with a TPM
    /// session (milliseconds, up to the TPM's time-out), so its proofs are made on the blocking
    /// executor, never on a cooperative thread; a software key signs in microseconds, in place.
    package func offPoolProof(method: String, url: URL, accessToken: String? = nil) async throws(DPoPSigningFailure) -> String {
        guard key.residence == .tpm else { return try proof(method: method, url: url, accessToken: accessToken) }
        return try await BlockingExecutor.shared.run { () throws(DPoPSigningFailure) -> String in
            try self.proof(method: method, url: url, accessToken: accessToken)
        }
    }

    /// Keeps `nonce` for `url`'s origin in this process and, when it is new, in the store.
    /// A store write that fails is only a lost shortcut: the next process pays one 400.
    package func recordShared(nonce: String, for url: URL) async {
        let origin = Self.origin(url)
        let changed = nonces.withLock { nonces in
            defer { nonces[origin] = nonce }
            return nonces[origin] != nonce
        }
        guard changed, let store else { return }
        _ = try? await StoreWork.perform(on: store) { try $0.recordDPoPNonce(nonce, origin: origin) }
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
    package func proof(method: String, url: URL, accessToken: String? = nil) throws(DPoPSigningFailure) -> String {
        try DPoPProof.make(
            key: key, method: method, url: url.absoluteString, nonce: nonce(for: url), accessToken: accessToken,
            issuedAt: now())
    }

    /// `scheme://host[:port]` of `url`, scheme and host in lower case, no default port: what a
    /// nonce is kept under (``DPoPProof/origin(_:)``).
    package static func origin(_ url: URL) -> String { DPoPProof.origin(url) }
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
