import FoundationEssentials
import TokenStore

extension TokenSession {
    // MARK: Sign-in

    /// Signs in with an Apple authorization code (Auth0's native token exchange): for apps
    /// that get a code from Apple themselves — a companion device, a web page using Sign in
    /// with Apple JS. A Linux desktop app has no way to get one: it signs in through the
    /// browser with ``signIn(account:redirectURIs:connection:scopes:audience:prompt:loginHint:maxAge:acrValues:timeout:browser:allowsUserChange:usesDPoP:onAuthorizationURL:)``.
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
    ///   - allowsUserChange: whether `account`, when it already has a user, may be signed in
    ///     as another one (its previous user is then recorded `revoked`). `false` (the
    ///     default): another user's sign-in throws ``AuthSessionError/Code/userChanged``.
    /// - Returns: the access token, the ID token and the profile.
    /// - Throws: ``AuthSessionError`` — `invalidGrant` (bad or used code: nothing stored),
    ///   `idTokenInvalid` (nothing stored), `notConnectedToInternet`, `timedOut`,
    ///   `rateLimited`, `serverError`, `invalidClient`, `unexpectedResponse` (no refresh
    ///   token or ID token in the answer), `userChanged` (nothing stored), `storage`.
    @discardableResult
    public func signInWithApple(
        authorizationCode: SecretBytes, appleUserID: String? = nil, account: AccountID,
        scopes: [String] = ["openid"], fullName: PersonName? = nil, allowsUserChange: Bool = false
    ) async throws -> SignInResult {
        // Bad names are refused before the server issues tokens that could then not be stored.
        try StoreWork.run { try SessionLedger.validateSignIn(account: account, appleUserID: appleUserID) }
        let requested = Self.withRequiredScopes(scopes)
        let dpop = try await signInBinding()
        let response = try await client.withDPoP(dpop).exchangeAppleAuthorizationCode(
            authorizationCode, scopes: requested, userProfile: fullName.flatMap(Self.appleUserProfile))
        return try await completeSignIn(
            response, requested: requested, audience: client.configuration.audience, account: account, nonce: nil,
            maxAge: nil, expectedAppleUserID: appleUserID, allowsUserChange: allowsUserChange, dpop: dpop)
    }

    /// The scopes of a sign-in: `openid` (for the ID token) always and `offline_access`
    /// (without a refresh token there is no session to keep) unless `offlineAccess` is false
    /// (a server whose `scopes_supported` does not list it), once each.
    static func withRequiredScopes(_ scopes: [String], offlineAccess: Bool = true) -> [String] {
        var requested = ["openid"]
        for scope in scopes where !requested.contains(scope) { requested.append(scope) }
        if offlineAccess, !requested.contains("offline_access") { requested.append("offline_access") }
        return requested
    }

    /// Auth0's `user_profile` of a first Apple sign-in: `{"name":{"firstName":…,"lastName":…}}`.
    static func appleUserProfile(_ name: PersonName) -> String? {
        var parts: [String: String] = [:]
        if let given = name.givenName, !given.isEmpty { parts["firstName"] = given }
        if let middle = name.middleName, !middle.isEmpty { parts["middleName"] = middle }
        if let family = name.familyName, !family.isEmpty { parts["lastName"] = family }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard !parts.isEmpty, let data = try? encoder.encode(["name": parts]) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The common end of both sign-ins: validates the ID token, stores everything in one
    /// transaction, and revokes what it replaced. Nothing is stored when the ID token fails
    /// a check, or signs another user into an account that has one without
    /// `allowsUserChange`; the refresh token the server issued is then revoked (one try), so
    /// it does not stay valid unseen. With `dpop`, a `DPoP` answer records the account bound
    /// to that key (a `Bearer` one from a server without DPoP stays unbound).
    func completeSignIn(
        _ response: TokenResponse, requested: [String], audience: String?, account: AccountID, nonce: String?,
        maxAge: Duration?, acrValues: [String] = [], expectedAppleUserID: String?, allowsUserChange: Bool,
        dpop: DPoPBinding? = nil
    ) async throws -> SignInResult {
        let identity: SignInIdentity
        let appleUserID: String
        do {
            guard let idToken = response.idToken else {
                throw AuthSessionError(.unexpectedResponse, "The token answer has no ID token; nothing was stored.")
            }
            let claims = try await idTokenValidator.validate(idToken, nonce: nonce, maxAge: maxAge, acrValues: acrValues)
            // With account linking `sub` may name another identity: the credential state is then
            // kept under `sub` itself.
            appleUserID = claims.appleUserID ?? claims.subject
            if let expectedAppleUserID, expectedAppleUserID != appleUserID {
                throw AuthSessionError.idTokenInvalid(check: .subject)
            }
            try StoreWork.run { try SessionLedger.validateSignIn(account: account, appleUserID: appleUserID) }
            // Review N1: a sign-in must not silently put another user's session under an
            // account the app already uses for one user (another local user may have steered
            // the browser). The stored user id is `sub`'s Apple id, or `sub` itself.
            if !allowsUserChange, let previous = try await StoreWork.perform(on: store, { try $0.appleUserID(account: account) }),
                previous != appleUserID
            {
                throw AuthSessionError(
                    .userChanged,
                    "The sign-in was of another user than the one the account is signed in as; nothing was stored "
                        + "(allow a change of user to replace it).")
            }
            guard response.refreshToken != nil else {
                throw AuthSessionError(
                    .unexpectedResponse, "The token answer has no refresh token; nothing was stored.")
            }
            // Asked for DPoP and answered with an unbound token: a copy of that refresh token would
            // work without the key, which is what the app asked to prevent.
            if dpop != nil, !Self.isDPoP(response) {
                throw AuthSessionError(
                    .unexpectedResponse,
                    "The sign-in asked for DPoP-bound tokens and the server answered with unbound ones (token_type "
                        + "\(response.tokenType)); nothing was stored.")
            }
            // A sign-in cancelled after the server answered stores nothing (and revokes what it got).
            if Task.isCancelled { throw AuthSessionError(.cancelled, "The sign-in was cancelled; nothing was stored.") }
            identity = SignInIdentity(
                idToken: idToken,
                profile: UserProfile(
                    userID: claims.appleUserID, subject: claims.subject, name: claims.name, email: claims.email,
                    emailVerified: claims.emailVerified))
        } catch {
            await revokeUnstored(response.refreshToken, at: response.servedBy, because: error)
            throw error
        }
        // Checked above.
        let refreshToken = response.refreshToken!
        let access = Self.token(from: response, requested: requested, audience: audience, source: .signIn)
        let boundTo = access.tokenType == "DPoP" ? dpop?.key.thumbprint : nil
        CrashPoint.reach("signIn.beforeSave")
        let replacedSession: Bool
        do {
            let (entry, servedBy) = (Self.cacheEntry(access), response.servedBy)
            replacedSession = try await StoreWork.transaction(on: store) {
                try $0.saveSignIn(
                    account: account, refreshToken: refreshToken, appleUserID: appleUserID, accessToken: entry,
                    cacheKey: AccessTokenKey(account: account, audience: audience, scopes: requested), identity: identity,
                    dpopThumbprint: boundTo, endpoints: servedBy)
            }
        } catch {
            await revokeUnstored(refreshToken, at: response.servedBy, because: error)
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
        let profile = (try? await StoreWork.perform(on: store) { try $0.userProfile(account: account) }) ?? identity.profile
        return SignInResult(
            accessToken: access,
            idToken: identity.idToken,
            declinedScopes: response.declinedScopes(requested: requested),
            profile: profile)
    }

    /// A refresh token the server issued but the sign-in will not store: one try to revoke it
    /// where it was issued. The try is not part of the caller's task: a cancelled sign-in returns
    /// at once and the revocation goes on.
    private func revokeUnstored(_ refreshToken: SecretBytes?, at endpoints: ServerEndpoints?, because error: any Error) async {
        guard let refreshToken else { return }
        let code = (error as? AuthSessionError)?.code.rawValue ?? "\(type(of: error))"
        let (client, logger) = (client.withoutRetries, logger)
        let attempt = Task {
            let revoked = await client.revoke(refreshToken, boundTo: endpoints)
            logger.warning(
                "sign-in not stored; tried to revoke the new refresh token",
                metadata: ["revoke.outcome": revoked.outcome, "error.code": code])
        }
        if !Task.isCancelled { await attempt.value }
    }

    /// The account's profile: user id, `sub`, name and email from its sign-ins' ID tokens
    /// (the name Apple sends once is kept). `nil` when the account has none.
    /// - Throws: ``AuthSessionError`` `storage`.
    public func userProfile(account: AccountID) throws -> UserProfile? {
        try StoreWork.run { try store.userProfile(account: account) }
    }
}
