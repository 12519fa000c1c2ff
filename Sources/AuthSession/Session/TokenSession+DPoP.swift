import FoundationEssentials
import TokenStore

extension TokenSession {
    // MARK: DPoP (RFC 9449)

    /// A DPoP proof for a request to the app's own API (a resource server): `htm` `method`,
    /// `htu` `url` without query and fragment, a fresh `jti`, and `ath`, the base64url SHA-256
    /// of `accessToken`, signed by the store's DPoP key. Send it as the `DPoP` header beside
    /// `Authorization: DPoP <token>` (``AccessToken/authorizationHeaderValue()``). It carries the
    /// latest nonce of `url`'s origin (scheme, host and port) that this store was given, by
    /// ``recordDPoPNonce(_:for:)`` or by the authorization server when it is that origin.
    ///
    /// A proof is never made for the authorization server's own token, revocation, pushed
    /// authorization (PAR) or device authorization endpoint: with one, a copy of the bound
    /// refresh token could be redeemed without the key.
    ///
    /// - Throws: ``AuthSessionError`` — `insecureConfiguration` (a URL that is not `http(s)`
    ///   with a host, carries a user name or password, is plain `http` to a host that is not
    ///   loopback, or is one of the authorization server's endpoints above), `invalidRequest`
    ///   (a Bearer token: it is not bound to any key), `dpopKeyLost` (the store has no DPoP key),
    ///   `unexpectedResponse` (the key could not sign), `storage`.
    public func dpopProof(method: String, url: URL, accessToken: AccessToken) async throws -> String {
        try Self.checkResourceURL(url)
        try await refuseAuthorizationServerEndpoint(url)
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            throw AuthSessionError(.invalidRequest, "A DPoP proof's method is an HTTP method in capitals (GET, POST…).")
        }
        guard accessToken.tokenType == "DPoP" else {
            throw AuthSessionError(.invalidRequest, "The access token is a Bearer token: it is not bound to a DPoP key.")
        }
        guard let key = try await droppingKeyWhenLocked({ try await DPoPKeys.load(store: store) }) else {
            throw AuthSessionError(.dpopKeyLost, "The store has no DPoP key: the user must sign in again.")
        }
        guard let token = accessToken.token.stringValue() else {
            throw AuthSessionError(.invalidRequest, "The access token is not text.")
        }
        do {
            return try await binding(for: key).sharedProof(method: method, url: url, accessToken: token)
        } catch {
            throw AuthSessionError(.unexpectedResponse, "The DPoP proof could not be made.")
        }
    }

    /// Keeps `nonce`, the `DPoP-Nonce` header of an answer from the API at `url` (RFC 9449 9:
    /// a `401` with `WWW-Authenticate: DPoP error="use_dpop_nonce"`, or any answer that brings a
    /// new one), for the proofs ``dpopProof(method:url:accessToken:)`` makes to `url`'s origin
    /// from now on: in this session and, sealed in the store, in the app's other processes.
    /// Retry the refused request with a new proof.
    ///
    /// - Throws: ``AuthSessionError`` — `insecureConfiguration` (a URL as
    ///   ``dpopProof(method:url:accessToken:)`` refuses), `invalidRequest` (not a nonce: empty,
    ///   over 1,024 bytes, or a character outside RFC 9449's `NQCHAR`: a space, `"`, `\`, a
    ///   control character), `storage`.
    public func recordDPoPNonce(_ nonce: String, for url: URL) async throws {
        try Self.checkResourceURL(url)
        guard Self.isDPoPNonce(nonce) else {
            throw AuthSessionError(
                .invalidRequest, "The DPoP nonce is not one (RFC 9449: 1 to 1,024 printable characters, no space, quote or backslash).")
        }
        // Kept whatever this store's key: a nonce belongs to the server, not to a key.
        let origin = DPoPBinding.origin(url)
        try await StoreWork.perform(on: store) { try $0.recordDPoPNonce(nonce, origin: origin) }
        dpopBindings.withLock { $0?.record(nonce: nonce, for: url) }
    }

    /// Whether `nonce` is one by RFC 9449's syntax (`1*NQCHAR`: `%x21 / %x23-5B / %x5D-7E`),
    /// at most 1,024 bytes.
    package static func isDPoPNonce(_ nonce: String) -> Bool {
        !nonce.isEmpty && nonce.utf8.count <= 1024
            && nonce.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// A resource URL a proof may be made for: `https` with a host (or `http` to a loopback
    /// host), without a user name or password.
    private static func checkResourceURL(_ url: URL) throws {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            let host = components.host, !host.isEmpty
        else {
            throw AuthSessionError(.insecureConfiguration, "A DPoP proof is made for an http(s) URL with a host.")
        }
        guard components.user == nil, components.password == nil else {
            throw AuthSessionError(.insecureConfiguration, "A DPoP proof's URL must not carry a user name or password.")
        }
        guard scheme == "https" || AuthorizationServerConfiguration.isLoopback(host: host) else {
            throw AuthSessionError(
                .insecureConfiguration, "A DPoP proof for plain http:// is made only to a loopback host; use https://.")
        }
    }

    /// Refuses a proof for one of the authorization server's endpoints that redeem tokens
    /// (token, revocation, PAR, device): the configured Auth0 paths, the discovery document's.
    private func refuseAuthorizationServerEndpoint(_ url: URL) async throws {
        var endpoints: [URL] = []
        let configuration = client.configuration
        if !configuration.usesDiscovery { endpoints = [configuration.tokenEndpoint, configuration.revocationEndpoint] }
        if let metadata = try? await client.metadata() { endpoints += metadata.redeemingEndpoints }
        let target = DPoPProof.htu(url.absoluteString)
        if endpoints.contains(where: { DPoPProof.htu($0.absoluteString) == target }) {
            throw AuthSessionError(
                .insecureConfiguration,
                "A DPoP proof for the authorization server's own token, revocation, PAR or device endpoint is refused: "
                    + "it would let a copy of the bound refresh token be redeemed without the key. Nothing was signed.")
        }
    }

    /// Whether `account`'s refresh token is bound to a DPoP key (its tokens are `DPoP`).
    /// Reads no secret, makes no network call.
    public func isDPoPBound(account: AccountID) async throws -> Bool {
        try await StoreWork.perform(on: store) { try $0.dpopBinding(account: account) } != nil
    }

    /// The client for `account`'s refreshes: with the DPoP binding its refresh token is bound
    /// to (by itself, whatever this session's configuration says), or the plain client for a
    /// Bearer session. A bound account whose key is gone or changed is cleared locally and
    /// ``AuthSessionError/Code/dpopKeyLost`` thrown: a new key is never made for an old session.
    func client(for account: AccountID) async throws -> AuthorizationServerClient {
        guard let bound = try await StoreWork.perform(on: store, { try $0.dpopBinding(account: account) }) else { return client }
        let key: (any DPoPSigningKey)?
        do {
            key = try await droppingKeyWhenLocked({ try await DPoPKeys.load(store: store) })
        } catch let error as AuthSessionError where error.code == .dpopKeyLost {
            key = nil
        }
        guard let key, key.thumbprint == bound else {
            _ = try? await StoreWork.transaction(on: store) { try $0.clearLocally(account: account) }
            logger.warning("the account's DPoP key is gone or changed; its session was cleared")
            throw AuthSessionError(
                .dpopKeyLost,
                "The DPoP key the account's refresh token is bound to is missing or changed; the session was cleared "
                    + "and the user must sign in again.")
        }
        return client.withDPoP(binding(for: key))
    }

    /// The binding a sign-in proves with when it asks for DPoP (`usesDPoP`, else the
    /// configuration's ``AuthorizationServerConfiguration/usesDPoP``): the store's key, made at the first one.
    func signInBinding(usesDPoP: Bool? = nil) async throws -> DPoPBinding? {
        guard usesDPoP ?? client.configuration.usesDPoP else { return nil }
        return binding(for: try await DPoPKeys.loadOrCreate(store: store))
    }

    /// Runs `body` (a load of the store's DPoP key); when the store is locked, this session's
    /// binding goes too, with the DPoP key it holds in memory (the software key's scalar is
    /// released and wiped with its last reference): a locked store leaves no key in the session.
    func droppingKeyWhenLocked<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as AuthSessionError where error.isStoreLocked {
            dpopBindings.withLock { $0 = nil }
            throw error
        }
    }

    /// This session's one binding of `key` (its nonces shared by every call, and with other
    /// processes through the store).
    private func binding(for key: any DPoPSigningKey) -> DPoPBinding {
        dpopBindings.withLock { bindings in
            if let existing = bindings, existing.key.thumbprint == key.thumbprint { return existing }
            let made = DPoPBinding(key: key, store: store)
            bindings = made
            return made
        }
    }
}
