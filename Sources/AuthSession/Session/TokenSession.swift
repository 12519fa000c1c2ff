import FoundationEssentials
import TokenStore

/// The session layer an app talks to: Sign in with Apple through Auth0, silent token
/// renewal with refresh-token rotation, and logout.
///
/// ```swift
/// let store = try TokenStore(appID: "com.example.notes")
/// let session = try TokenSession(store: store, configuration: .init(domain: "https://tenant.auth0.com", clientID: "…"))
/// try await session.signInWithApple(authorizationCode: code, appleUserID: user, account: "me", scopes: ["openid", "read:notes"])
/// let token = try await session.accessToken(for: "me", scopes: ["read:notes"])
/// _ = try await session.logout(account: "me")
/// ```
///
/// All network calls go through one ``AuthorizationServerClient`` and its ``RetryPolicy``.
/// Renewals of one account are single-flight: concurrent callers in this process share one
/// refresh, and callers in other processes wait on a lock beside the database and then find
/// the fresh token in the store, so a rotating refresh token is never presented twice.
public final class TokenSession: Sendable {
    public let store: TokenStore
    public let client: AuthorizationServerClient
    /// The logout coordinator behind ``logout(account:)`` and ``resumePendingRevocations(includingNotDue:includingFailed:)``.
    package let logoutCoordinator: LogoutCoordinator
    let logger: TokenStoreLogger
    let idTokenValidator: IDTokenValidator
    private let renewals = KeyedSerializer()
    private let renewalLock: RenewalLock
    /// The DPoP binding of the store's key, made at its first use (``client(for:)``).
    let dpopBindings = Locked<DPoPBinding?>(nil)

    /// A session over `store` talking to the server in `configuration`.
    public convenience init(
        store: TokenStore, configuration: AuthorizationServerConfiguration,
        transport: any HTTPTransport = CurlTransport(), retryPolicy: RetryPolicy = .default,
        logger: TokenStoreLogger = .disabled
    ) {
        self.init(
            store: store,
            client: AuthorizationServerClient(configuration: configuration, transport: transport, retryPolicy: retryPolicy, logger: logger),
            logger: logger)
    }

    /// A session over `store` using `client` for every network call.
    public init(store: TokenStore, client: AuthorizationServerClient, logger: TokenStoreLogger = .disabled) {
        self.store = store
        // An issuer's discovery document is also kept sealed in the store, for the next process.
        let client = client.keepingDiscovery(in: store)
        self.client = client
        self.logger = logger
        logoutCoordinator = LogoutCoordinator(store: store, client: client, logger: logger)
        idTokenValidator = IDTokenValidator(client: client, logger: logger)
        renewalLock = RenewalLock(storePath: store.path)
    }

    // MARK: Access tokens

    /// An access token for `account` and the API `audience`, covering `scopes` and valid for
    /// at least `minimumTTL` (Auth0.swift's `apiCredentials(forAudience:scope:minTTL:)`, MSAL's
    /// `acquireTokenSilent`): from the sealed cache when it qualifies, otherwise by a refresh.
    ///
    /// Access tokens are cached per (account, audience, scope set), each sealed with its expiry:
    /// one refresh token serves every API (Auth0's Multi-Resource Refresh Tokens), and a
    /// refresh for one audience stores the rotated refresh token and its own access token in one
    /// durable transaction, leaving the other audiences' tokens valid — with a `domain:`
    /// (Auth0) configuration. With an `issuer:` one, a refresh that rotates the refresh token
    /// drops the other cached tokens, which the server may have revoked with the old refresh
    /// token (django-oauth-toolkit does). Renewals of one account are single-flight, within
    /// this process and across processes.
    ///
    /// - Parameters:
    ///   - audience: the API; `nil` uses the configuration's ``AuthorizationServerConfiguration/audience``.
    ///   - scopes: the scopes asked for (`offline_access` is never needed here).
    ///   - minimumTTL: the shortest remaining lifetime accepted. When it is longer than the
    ///     lifetime the server gives tokens, no refresh can help: ``AuthSessionError/Code/minimumTTLTooLarge``
    ///     (with ``AuthSessionError/tokenLifetime``) after at most one refresh, never a refresh per call.
    ///   - requiringScopes: scopes the app cannot go on without. When one is declined the call
    ///     throws ``AuthSessionError/Code/serverDeclinedScopes`` (the token for the granted scopes
    ///     is in ``AuthSessionError/grantedAccessToken``). Other declined scopes are only reported
    ///     in ``AccessToken/declinedScopes``.
    ///   - forceRefresh: refresh at the server whatever the cache holds (MSAL's `forceRefresh`).
    /// - Throws: ``AuthSessionError`` — `interactionRequired` (no refresh token, or `invalid_grant`:
    ///   the stored token is no longer offered), `minimumTTLTooLarge`, `serverDeclinedScopes`,
    ///   `notConnectedToInternet`, `timedOut`, `rateLimited`, `serverError`, `invalidClient`,
    ///   `unexpectedResponse`, `storage`.
    public func accessToken(
        for account: AccountID, audience: String? = nil, scopes: [String] = [], minimumTTL: Duration = .seconds(60),
        requiringScopes: [String] = [], forceRefresh: Bool = false
    ) async throws -> AccessToken {
        let key = AccessTokenKey(account: account, audience: audience ?? client.configuration.audience, scopes: scopes)
        let token = try await accessToken(key, minimumTTL: minimumTTL, forceRefresh: forceRefresh)
        let missing = Set(requiringScopes).subtracting(["offline_access"]).subtracting(token.grantedScopes)
        if !missing.isEmpty {
            var error = AuthSessionError.serverDeclinedScopes(granted: token.grantedScopes, declined: missing.sorted())
            error.grantedAccessToken = token
            throw error
        }
        return token
    }

    /// Refreshes at the server now (Auth0.swift's `renew()`): the server sees exactly one
    /// refresh, and the rotated refresh token and the new access token are stored together.
    /// Same as ``accessToken(for:audience:scopes:minimumTTL:requiringScopes:forceRefresh:)``
    /// with `forceRefresh: true`.
    @discardableResult
    public func renew(account: AccountID, audience: String? = nil, scopes: [String] = []) async throws -> AccessToken {
        try await accessToken(for: account, audience: audience, scopes: scopes, minimumTTL: .zero, forceRefresh: true)
    }

    /// Whether a cached access token for `account`, `audience` and `scopes` lives at least
    /// `minimumTTL` more (Auth0.swift's `hasValid(minTTL:)`). No network.
    public func hasValidAccessToken(
        for account: AccountID, audience: String? = nil, scopes: [String] = [], minimumTTL: Duration = .seconds(60)
    ) throws -> Bool {
        let key = AccessTokenKey(account: account, audience: audience ?? client.configuration.audience, scopes: scopes)
        return try cachedToken(key, minimumTTL: minimumTTL) != nil
    }

    /// Whether `account` has a refresh token to renew with (Auth0.swift's `canRenew()`): the
    /// user is signed in here. Reads no secret, makes no network call.
    public func canRenew(account: AccountID) throws -> Bool {
        try StoreWork.run { try store.ledger.hasRefreshToken(account: account) }
    }

    // MARK: Internals

    private func accessToken(_ key: AccessTokenKey, minimumTTL: Duration, forceRefresh: Bool) async throws -> AccessToken {
        if !forceRefresh, let cached = try await StoreWork.blocking({ try self.cachedToken(key, minimumTTL: minimumTTL) }) {
            return cached
        }
        return try await renewals.run(key.account) {
            if !forceRefresh {
                // Another caller in this process may have refreshed while we queued.
                let cached = try await StoreWork.blocking { () throws -> AccessToken? in
                    if let cached = try self.cachedToken(key, minimumTTL: minimumTTL) { return cached }
                    try self.refuseHopelessMinimumTTL(key, minimumTTL: minimumTTL)
                    return nil
                }
                if let cached { return cached }
            }
            // Once the lock is held, the refresh runs to its end whatever happens to the caller (a
            // refresh the server answered must store its rotated refresh token): a cancelled caller
            // is released at once with `cancelled`, and the lock when the refresh has finished.
            let held = try await self.renewalLock.acquire()
            // Until the refresh token is read, nothing is sent: a cancelled caller also ends a
            // user-presence check the read waits on (polkit's dialog closes, the renewal throws
            // `cancelled`). A refresh already sent is not touched by it.
            let presence = PresenceCancellation()
            let renewal = Task { () async throws -> AccessToken in
                defer { held.release() }
                // ...or another process, while we waited for the lock.
                if !forceRefresh, let cached = try await StoreWork.blocking({ try self.cachedToken(key, minimumTTL: minimumTTL) }) {
                    return cached
                }
                let token = try await self.refresh(key, presence: presence)
                guard forceRefresh || token.isValid(minimumTTL: minimumTTL) || token.expiresAt == nil else {
                    throw Self.minimumTTLTooLarge(minimumTTL, lifetime: token.expiresAt!.timeIntervalSinceNow)
                }
                return token
            }
            return try await withTaskCancellationHandler {
                try await CancellableWait.value("The renewal") { await renewal.result }
            } onCancel: {
                presence.cancel()
            }
        }
    }

    /// A cached token at `key` — or, failing that, any token cached for the same account and
    /// audience whose granted scopes cover `key`'s — that lives at least `minimumTTL` more.
    private func cachedToken(_ key: AccessTokenKey, minimumTTL: Duration) throws -> AccessToken? {
        func usable(_ entry: AccessTokenEntry) -> Bool {
            entry.expiresAt.timeIntervalSinceNow >= minimumTTL.timeInterval
        }
        if let entry = try StoreWork.run({ try self.store.ledger.cachedAccessToken(key) }), usable(entry) {
            return Self.token(entry, audience: key.audience, source: .cache)
        }
        let covering = try StoreWork.run { try self.store.ledger.cachedAccessTokens(account: key.account) }.first {
            $0.key.audience == key.audience && Set(key.scopes).isSubset(of: Set($0.entry.scopes)) && usable($0.entry)
        }
        return covering.map { Self.token($0.entry, audience: key.audience, source: .cache) }
    }

    /// Throws ``AuthSessionError/Code/minimumTTLTooLarge`` when the token cached at `key` shows
    /// that the server's tokens live shorter than `minimumTTL`: a refresh would give another
    /// token too short-lived, and rotate the refresh token for nothing. Only while that token
    /// is unexpired: after it, one refresh is allowed again (the server's lifetime may have
    /// changed), so at most one refresh per token lifetime is spent on a hopeless minimum TTL.
    private func refuseHopelessMinimumTTL(_ key: AccessTokenKey, minimumTTL: Duration) throws {
        guard let cached = try StoreWork.run({ try self.store.ledger.cachedAccessTokens(account: key.account) })
            .first(where: { $0.key == key }), cached.entry.expiresAt > Date()
        else { return }
        let lifetime = cached.entry.expiresAt.timeIntervalSince(cached.updatedAt)
        if lifetime < minimumTTL.timeInterval { throw Self.minimumTTLTooLarge(minimumTTL, lifetime: lifetime) }
    }

    static func minimumTTLTooLarge(_ minimumTTL: Duration, lifetime: TimeInterval) -> AuthSessionError {
        var error = AuthSessionError(
            .minimumTTLTooLarge,
            "The minimum TTL (\(Int(minimumTTL.timeInterval)) s) is longer than the server's access tokens live "
                + "(\(Int(lifetime.rounded())) s): ask for a shorter minimum TTL.")
        error.tokenLifetime = .milliseconds(Int64((max(0, lifetime) * 1000).rounded()))
        return error
    }

    private func refresh(_ key: AccessTokenKey, presence: PresenceCancellation) async throws -> AccessToken {
        let account = key.account
        guard let (presented, bound) = try await StoreWork.run({
            try await self.store.onBlockingExecutor(presence: presence) { try $0.boundRefreshToken(account: account) }
        }) else {
            throw AuthSessionError(.interactionRequired, "No refresh token is stored for the account; the user must sign in.")
        }
        let client = try await client(for: account)
        CrashPoint.reach("renewal.beforeRequest")
        let response: TokenResponse
        do {
            // Sent where it was issued (its recorded endpoints), never where a copy says.
            response = try await client.refresh(presented, scopes: key.scopes, audience: key.audience, boundTo: bound)
        } catch let error as AuthSessionError where error.code == .interactionRequired && error.oauthError == "invalid_grant" {
            // Refused for good (expired, revoked, reused). An OIDC "user must act" answer
            // (mfa_required, consent_required...) is also interactionRequired, but the token stays.
            try await StoreWork.transaction(on: self.store) { try $0.rejectRefreshToken(account: account, presented: presented) }
            logger.info("refresh refused; token no longer offered", metadata: ["oauth.error": error.oauthError ?? "-"])
            throw error
        }
        CrashPoint.reach("renewal.afterServerAnswer")
        let token = Self.token(from: response, requested: key.scopes, audience: key.audience, source: .network)
        // A DPoP-bound refresh answered with a Bearer token: the server did not bind it. The
        // rotated refresh token is still stored (losing it would sign the user out), the access
        // token is not handed out.
        let downgraded = client.dpop != nil && !Self.isDPoP(response)
        let entry = downgraded ? nil : Self.cacheEntry(token)
        // An access token the cache cannot hold is handed on uncached: losing the rotated
        // refresh token over it would sign the user out. A provider found by discovery may
        // revoke the access tokens of a rotated-out refresh token (django-oauth-toolkit
        // does): a rotation drops the other cached ones. Auth0 (`domain:`) keeps them.
        let dropsOthers = client.configuration.dialect.rotationRevokesAccessTokens
        let (rotated, servedBy) = (response.refreshToken, response.servedBy)
        let replacement = try await StoreWork.transaction(on: store) {
            try $0.replaceRefreshToken(
                account: account, presented: presented, with: rotated, accessToken: entry, cacheKey: key,
                dropsOtherAccessTokens: dropsOthers, endpoints: servedBy)
        }
        CrashPoint.reach("renewal.afterCommit")
        if replacement == .superseded {
            // A logout won the race: one try to revoke what we just obtained (it stays queued for
            // the next resume if that fails), and report the sign-out.
            _ = try await logoutCoordinator.revokeQueuedOnce(account: account)
            throw AuthSessionError(.interactionRequired, "The account was logged out while its token was being renewed.")
        }
        if downgraded {
            throw AuthSessionError(
                .unexpectedResponse,
                "The server answered a DPoP-bound refresh with a token that is not DPoP-bound (token_type "
                    + "\(response.tokenType)); it was not used. The refresh token was kept.")
        }
        logger.debug("renewed", metadata: ["rotated": "\(response.refreshToken != nil)"])
        return token
    }

    /// Whether a token answer is DPoP-bound (`token_type` `DPoP`, any case).
    static func isDPoP(_ response: TokenResponse) -> Bool {
        response.tokenType.lowercased() == "dpop"
    }

    /// The access token of a token answer.
    static func token(from response: TokenResponse, requested: [String], audience: String?, source: AccessToken.Source)
        -> AccessToken
    {
        AccessToken(
            token: response.accessToken, expiresAt: response.expiresAt, audience: audience,
            grantedScopes: response.grantedScopes, declinedScopes: response.declinedScopes(requested: requested),
            source: source, tokenType: response.tokenType)
    }

    static func token(_ entry: AccessTokenEntry, audience: String?, source: AccessToken.Source) -> AccessToken {
        AccessToken(
            token: entry.token, expiresAt: entry.expiresAt, audience: audience, grantedScopes: entry.scopes,
            declinedScopes: entry.declinedScopes, source: source, tokenType: entry.tokenType)
    }

    /// The cache entry of `token`, or `nil` when it cannot be cached: no expiry (never served
    /// from the cache), or beyond the store's limits.
    static func cacheEntry(_ token: AccessToken) -> AccessTokenEntry? {
        guard let expiresAt = token.expiresAt else { return nil }
        let entry = AccessTokenEntry(
            token: token.token, expiresAt: expiresAt, scopes: token.grantedScopes, declinedScopes: token.declinedScopes,
            tokenType: token.tokenType == "DPoP" ? "DPoP" : nil)
        return entry.isCacheable ? entry : nil
    }

}
