import Foundation
import TokenStore

/// The session layer an app talks to: Sign in with Apple through Auth0, silent token
/// renewal with refresh-token rotation, and logout.
///
/// ```swift
/// let store = try TokenStore(appID: "com.example.notes")
/// let session = try TokenSession(store: store, configuration: .init(domain: "https://tenant.auth0.com", clientID: "…"))
/// try await session.signInWithApple(authorizationCode: code, appleUserID: user, account: "me", scopes: ["openid", "read:notes"])
/// let token = try await session.acquireTokenSilently(account: "me", scopes: ["read:notes"])
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
    /// The logout coordinator (also reachable through ``logout(account:service:)``).
    public let logoutCoordinator: LogoutCoordinator
    let logger: TokenStoreLogger
    let idTokenValidator: IDTokenValidator
    private let renewals = KeyedSerializer()
    private let renewalLock: RenewalLock

    /// A session over `store` talking to the server in `configuration`.
    public convenience init(
        store: TokenStore, configuration: AuthorizationServerConfiguration,
        transport: any HTTPTransport = URLSessionTransport(), retryPolicy: RetryPolicy = .default,
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
        self.client = client
        self.logger = logger
        logoutCoordinator = LogoutCoordinator(store: store, client: client, logger: logger)
        idTokenValidator = IDTokenValidator(configuration: client.configuration, transport: client.transport, logger: logger)
        renewalLock = RenewalLock(storePath: store.path)
    }

    // MARK: Sign-in

    /// Signs in with an Apple authorization code (Auth0's native token exchange): for apps
    /// that get a code from Apple themselves — a companion device, a web page using Sign in
    /// with Apple JS. A Linux desktop app has no way to get one: it signs in through the
    /// browser with ``signIn(account:redirectURIs:connection:scopes:audience:maxAge:timeout:browser:onAuthorizationURL:)``.
    ///
    /// `openid` and `offline_access` are always requested. The ID token is validated as in
    /// the browser sign-in (without a nonce: the native exchange has none), and the refresh
    /// token, the Apple user id, the ID token, the profile and the access token are stored
    /// in one transaction, the user recorded `authorized`.
    ///
    /// - Parameters:
    ///   - appleUserID: the user id Apple gave with the code, when the app has it: it must
    ///     be the one in the ID token. `nil`: taken from the ID token.
    ///   - fullName: the name Apple gives the app on the user's first authorization only;
    ///     sent as Auth0's `user_profile` so the profile keeps it.
    /// - Returns: the access token, the ID token and the profile.
    /// - Throws: ``AuthSessionError`` — `invalidGrant` (bad or used code: nothing stored),
    ///   `idTokenInvalid` (nothing stored), `notConnectedToInternet`, `timedOut`,
    ///   `rateLimited`, `serverError`, `invalidClient`, `unexpectedResponse` (no refresh
    ///   token or ID token in the answer), `storage`.
    @discardableResult
    public func signInWithApple(
        authorizationCode: SecretBytes, appleUserID: String? = nil, account: AccountID,
        scopes: [String] = ["openid"], fullName: PersonNameComponents? = nil
    ) async throws -> SignInResult {
        // Bad names are refused before the server issues tokens that could then not be stored.
        try storage { try SessionLedger.validateSignIn(account: account, appleUserID: appleUserID) }
        let requested = Self.withRequiredScopes(scopes)
        let response = try await client.exchangeAppleAuthorizationCode(
            authorizationCode, scopes: requested, userProfile: fullName.flatMap(Self.appleUserProfile))
        return try await completeSignIn(
            response, requested: requested, account: account, nonce: nil, maxAge: nil, expectedAppleUserID: appleUserID)
    }

    /// The scopes of a sign-in: `openid` (for the ID token) and `offline_access` (without a
    /// refresh token there is no session to keep) always, once each.
    static func withRequiredScopes(_ scopes: [String]) -> [String] {
        var requested = ["openid"]
        for scope in scopes where !requested.contains(scope) { requested.append(scope) }
        if !requested.contains("offline_access") { requested.append("offline_access") }
        return requested
    }

    /// Auth0's `user_profile` of a first Apple sign-in: `{"name":{"firstName":…,"lastName":…}}`.
    static func appleUserProfile(_ name: PersonNameComponents) -> String? {
        var parts: [String: String] = [:]
        if let given = name.givenName, !given.isEmpty { parts["firstName"] = given }
        if let middle = name.middleName, !middle.isEmpty { parts["middleName"] = middle }
        if let family = name.familyName, !family.isEmpty { parts["lastName"] = family }
        guard !parts.isEmpty,
            let data = try? JSONSerialization.data(withJSONObject: ["name": parts], options: [.sortedKeys])
        else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The common end of both sign-ins: validates the ID token, stores everything in one
    /// transaction, and revokes what it replaced. Nothing is stored when the ID token fails
    /// a check; the refresh token the server issued is then revoked (one try), so it does
    /// not stay valid unseen.
    func completeSignIn(
        _ response: TokenResponse, requested: [String], account: AccountID, nonce: String?, maxAge: Duration?,
        expectedAppleUserID: String?
    ) async throws -> SignInResult {
        let identity: SignInIdentity
        let appleUserID: String
        do {
            guard let idToken = response.idToken else {
                throw AuthSessionError(.unexpectedResponse, "The token answer has no ID token; nothing was stored.")
            }
            let claims = try await idTokenValidator.validate(idToken, nonce: nonce, maxAge: maxAge)
            // With account linking `sub` may name another identity: the credential state is then
            // kept under `sub` itself.
            appleUserID = claims.appleUserID ?? claims.subject
            if let expectedAppleUserID, expectedAppleUserID != appleUserID {
                throw AuthSessionError.idTokenInvalid(check: .subject)
            }
            try storage { try SessionLedger.validateSignIn(account: account, appleUserID: appleUserID) }
            guard response.refreshToken != nil else {
                throw AuthSessionError(
                    .unexpectedResponse, "The token answer has no refresh token; nothing was stored.")
            }
            identity = SignInIdentity(
                idToken: idToken,
                profile: UserProfile(
                    userID: claims.appleUserID, subject: claims.subject, name: claims.name, email: claims.email,
                    emailVerified: claims.emailVerified))
        } catch {
            await revokeUnstored(response.refreshToken, because: error)
            throw error
        }
        // Checked above.
        let refreshToken = response.refreshToken!
        let access = Self.entry(from: response)
        let replacedSession: Bool
        do {
            replacedSession = try storage {
                try self.store.ledger.saveSignIn(
                    account: account, refreshToken: refreshToken, appleUserID: appleUserID,
                    accessToken: access.isCacheable ? access : nil, identity: identity)
            }
        } catch {
            await revokeUnstored(refreshToken, because: error)
            throw error
        }
        if replacedSession {
            // The account's previous refresh token went to the outbox: one try to revoke it now.
            // A failure leaves it queued for the next resume; the sign-in itself has succeeded and
            // is not held up by retries, nor by other accounts' queued entries.
            do {
                _ = try await logoutCoordinator.revokeQueuedOnce(account: account)
            } catch {
                logger.warning("revoking the replaced session failed; it stays queued", metadata: ["error": "\(type(of: error))"])
            }
        }
        logger.info("signed in", metadata: ["token.fp": refreshToken.fingerprint])
        let profile = (try? store.userProfile(account: account)) ?? identity.profile
        return SignInResult(
            accessToken: AccessToken(token: access.token, expiresAt: access.expiresAt, scopes: access.scopes, source: .signIn),
            idToken: identity.idToken,
            declinedScopes: response.declinedScopes(requested: requested),
            profile: profile)
    }

    /// A refresh token the server issued but the sign-in will not store: one try to revoke it.
    private func revokeUnstored(_ refreshToken: SecretBytes?, because error: any Error) async {
        guard let refreshToken else { return }
        let revoked = await client.withoutRetries.revoke(refreshToken)
        let code = (error as? AuthSessionError)?.code.rawValue ?? "\(type(of: error))"
        logger.warning(
            "sign-in not stored; tried to revoke the new refresh token",
            metadata: ["revoke.outcome": revoked.outcome, "error.code": code])
    }

    /// The account's profile: user id, `sub`, name and email from its sign-ins' ID tokens
    /// (the name Apple sends once is kept). `nil` when the account has none.
    /// - Throws: ``AuthSessionError`` `storage`.
    public func userProfile(account: AccountID) throws -> UserProfile? {
        try storage { try store.userProfile(account: account) }
    }

    // MARK: Silent renewal

    /// An access token for `account` covering `scopes`, valid for at least `minimumTTL`:
    /// from the sealed cache when it qualifies, otherwise by a refresh at the server.
    ///
    /// With rotation, the new refresh token and access token are stored in one durable
    /// transaction before the access token is returned. A logout that started meanwhile
    /// wins: the new refresh token goes to the revocation outbox and is revoked.
    /// - Throws: ``AuthSessionError`` — `interactionRequired` (no refresh token, or
    ///   `invalid_grant`: the stored token is no longer offered), `serverDeclinedScopes`
    ///   (the token for the granted scopes is in the error's `grantedScopes` and stored in
    ///   the cache), `notConnectedToInternet`, `timedOut`, `rateLimited`, `serverError`,
    ///   `invalidClient`, `unexpectedResponse`, `storage`.
    public func acquireTokenSilently(
        account: AccountID, scopes: [String] = [],
        minimumTTL: Duration = .seconds(60)
    ) async throws -> AccessToken {
        if let cached = try cachedToken(account: account, scopes: scopes, minimumTTL: minimumTTL) {
            return cached
        }
        return try await renewals.run(account) {
            // Another caller in this process may have refreshed while we queued.
            if let cached = try self.cachedToken(account: account, scopes: scopes, minimumTTL: minimumTTL) {
                return cached
            }
            return try await self.renewalLock.withLock {
                // ...or another process, while we waited for the lock.
                if let cached = try self.cachedToken(account: account, scopes: scopes, minimumTTL: minimumTTL) {
                    return cached
                }
                return try await self.refresh(account: account, scopes: scopes)
            }
        }
    }

    /// Logs `account` out (see ``LogoutCoordinator``).
    public func logout(account: AccountID) async throws -> LogoutOutcome {
        try await logoutCoordinator.logout(account: account)
    }

    // MARK: Internals

    private func refresh(account: AccountID, scopes: [String]) async throws -> AccessToken {
        guard let presented = try storage({ try self.store.refreshToken(account: account) }) else {
            throw AuthSessionError(.interactionRequired, "No refresh token is stored for the account; the user must sign in.")
        }
        let response: TokenResponse
        do {
            response = try await client.refresh(presented, scopes: scopes)
        } catch let error as AuthSessionError where error.code == .interactionRequired && error.oauthError == "invalid_grant" {
            // Refused for good (expired, revoked, reused). An OIDC "user must act" answer
            // (mfa_required, consent_required...) is also interactionRequired, but the token stays.
            try storage { try self.store.ledger.rejectRefreshToken(account: account, presented: presented) }
            logger.info("refresh refused; token no longer offered", metadata: ["oauth.error": error.oauthError ?? "-"])
            throw error
        }
        CrashPoint.reach("renewal.afterServerAnswer")
        let access = Self.entry(from: response, requested: scopes)
        let replacement = try storage {
            // An access token the cache cannot hold is handed on uncached: losing the rotated
            // refresh token over it would sign the user out.
            try self.store.ledger.replaceRefreshToken(
                account: account, presented: presented, with: response.refreshToken,
                accessToken: access.isCacheable ? access : nil)
        }
        CrashPoint.reach("renewal.afterCommit")
        if replacement == .superseded {
            // A logout won the race: one try to revoke what we just obtained (it stays queued for
            // the next resume if that fails), and report the sign-out.
            _ = try await logoutCoordinator.revokeQueuedOnce(account: account)
            throw AuthSessionError(.interactionRequired, "The account was logged out while its token was being renewed.")
        }
        logger.debug("renewed", metadata: ["rotated": "\(response.refreshToken != nil)"])
        let token = AccessToken(token: access.token, expiresAt: access.expiresAt, scopes: access.scopes, source: .network)
        let declined = response.declinedScopes(requested: scopes)
        if !declined.isEmpty {
            var error = AuthSessionError.serverDeclinedScopes(granted: access.scopes, declined: declined)
            error.grantedAccessToken = token
            throw error
        }
        return token
    }

    private func cachedToken(account: AccountID, scopes: [String], minimumTTL: Duration) throws -> AccessToken? {
        guard let entry = try storage({ try self.store.ledger.cachedAccessToken(account: account) }) else { return nil }
        guard entry.expiresAt.timeIntervalSinceNow >= minimumTTL.timeInterval,
              Set(scopes).subtracting(["offline_access"]).isSubset(of: Set(entry.scopes))
        else { return nil }
        return AccessToken(token: entry.token, expiresAt: entry.expiresAt, scopes: entry.scopes, source: .cache)
    }

    static func entry(from response: TokenResponse, requested: [String] = []) -> AccessTokenEntry {
        // No expires_in: hand the token on but never serve it from the cache.
        let expiresAt = response.expiresAt ?? Date()
        return AccessTokenEntry(token: response.accessToken, expiresAt: expiresAt, scopes: response.grantedScopes)
    }

    @discardableResult
    func storage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as TokenStoreError { throw AuthSessionError.storage(error) }
    }
}
