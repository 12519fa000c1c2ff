import FoundationEssentials
import TokenStore

extension TokenSession {
    /// Signs in on a machine without a browser (an SSH session, a kiosk, a server): the device
    /// authorization grant (RFC 8628). The user opens a page on any other device, types the
    /// code this call hands to `onUserCode`, and signs in there; meanwhile this call polls the
    /// token endpoint.
    ///
    /// 1. Asks the device authorization endpoint (`device_authorization_endpoint` of the
    ///    discovery document; `{domain}/oauth/device/code` at Auth0) for a device code and a
    ///    user code, and calls `onUserCode` once with the user code and the verification
    ///    addresses (``DeviceAuthorization``).
    /// 2. Polls the token endpoint every `interval` (5 s unless the server says): `authorization_pending`
    ///    waits on, `slow_down` adds 5 s to the interval (RFC 8628 §3.5), a transient failure
    ///    (offline, 5xx, 429) doubles it; until the user approves, declines, or the code expires.
    /// 3. Validates the ID token as the other sign-ins do (signature, `iss`, `aud`, `exp`; there
    ///    is no nonce in this grant) and stores everything in one transaction, the refresh token
    ///    bound to the endpoints that issued it, as ``signIn(account:redirectURIs:connection:scopes:audience:prompt:loginHint:maxAge:acrValues:timeout:browser:allowsUserChange:usesDPoP:onAuthorizationURL:)`` does.
    ///
    /// ```swift
    /// let result = try await session.signInWithDevice(account: "me") { code in
    ///     print("Open \(code.verificationURI) and enter \(code.userCode)")
    /// }
    /// ```
    ///
    /// Cancel it by cancelling the task: the wait ends at once with `cancelled`, nothing stored.
    /// With DPoP (`usesDPoP`, or the configuration's) the device authorization request names the
    /// store's key (`dpop_jkt`) and every poll carries a proof, so the tokens are bound to it.
    ///
    /// - Parameters:
    ///   - scopes: `openid` and `offline_access` are always added (`offline_access` only when
    ///     the server lists it, as for the browser sign-in).
    ///   - audience: the API the access token is for (`audience` at Auth0, `resource` else);
    ///     `nil`: the configuration's.
    ///   - allowsUserChange: as for the browser sign-in.
    ///   - usesDPoP: `nil`: ``AuthorizationServerConfiguration/usesDPoP``.
    ///   - onUserCode: called once, before the first poll, with what to show the user. The
    ///     user code is not a secret (it is worthless without the device code, which stays in
    ///     the session); do show it.
    /// - Throws: ``AuthSessionError`` — `unsupportedByServer` (the server has no device grant),
    ///   `authorizationFailed` (`access_denied`: the user declined), `timedOut` (`expired_token`,
    ///   or the code's `expires_in` passed), `cancelled`, `invalidGrant` (the server refused the
    ///   device code), `idTokenInvalid`, `userChanged`, `invalidClient`, `invalidRequest`,
    ///   `unexpectedResponse`, `insecureConfiguration` (a verification URI that is not https),
    ///   the network codes when the device authorization request fails, `storage`. Nothing is
    ///   stored when it throws.
    @discardableResult
    public func signInWithDevice(
        account: AccountID, scopes: [String] = ["openid", "profile", "email"], audience: String? = nil,
        allowsUserChange: Bool = false, usesDPoP: Bool? = nil,
        onUserCode: @Sendable (DeviceAuthorization) -> Void
    ) async throws -> SignInResult {
        try StoreWork.run { try SessionLedger.validateSignIn(account: account, appleUserID: nil) }
        let metadata = try await client.metadata()
        let audience = audience ?? client.configuration.audience
        let requested = Self.withRequiredScopes(
            scopes, offlineAccess: client.configuration.dialect.asksOfflineAccess(metadata))
        let dpop = try await signInBinding(usesDPoP: usesDPoP)
        let bound = client.withDPoP(dpop)
        let device = try await bound.requestDeviceAuthorization(scopes: requested, audience: audience, metadata: metadata)
        onUserCode(device.authorization)
        let response = try await pollUntilApproved(device, client: bound, scopes: requested)
        return try await completeSignIn(
            response, requested: requested, audience: audience, account: account, nonce: nil, maxAge: nil,
            expectedAppleUserID: nil, allowsUserChange: allowsUserChange, dpop: dpop)
    }

    /// The polls of RFC 8628 §3.4–3.5 until the token endpoint answers with tokens, or a final error.
    private func pollUntilApproved(
        _ device: DeviceAuthorizationResponse, client: AuthorizationServerClient, scopes: [String]
    ) async throws -> TokenResponse {
        let clock = client.retryPolicy.clock
        var interval = device.authorization.interval
        var polls = 0
        while true {
            let remaining = device.authorization.expiresAt.timeIntervalSince(clock.wallClock())
            guard remaining > 0 else { throw Self.deviceCodeExpired() }
            do {
                try await clock.sleep(min(interval, .seconds(remaining)))
            } catch {
                throw AuthSessionError(.cancelled, "The device sign-in was cancelled.")
            }
            try Task.checkCancellationAsAuthError()
            guard device.authorization.expiresAt > clock.wallClock() else { throw Self.deviceCodeExpired() }
            polls += 1
            do {
                let response = try await client.pollDeviceCode(device.deviceCode, scopes: scopes)
                logger.info("Device sign-in approved.", metadata: ["device.polls": "\(polls)"])
                return response
            } catch let error as AuthSessionError {
                switch error.oauthError {
                case "authorization_pending" where error.code == .interactionRequired:
                    continue
                case "slow_down" where error.code == .interactionRequired:
                    interval += .seconds(5)
                    logger.info("The server asked to poll more slowly.", metadata: ["device.interval_s": "\(interval.components.seconds)"])
                    continue
                default:
                    break
                }
                // A refusal (a 4xx answer: access_denied, expired_token, invalid_grant, …) is final;
                // only a failure of the exchange itself (offline, 408, 429, 5xx) is polled through.
                if let status = error.httpStatus, (400..<500).contains(status), status != 408, status != 429 { throw error }
                guard error.isTransient, error.code != .cancelled else { throw error }
                // RFC 8628 3.5: a failed poll lowers the polling frequency; the code's expiry ends it.
                interval = min(max(interval * 2, error.retryAfter ?? .zero), .seconds(DeviceAuthorizationResponse.maximumInterval))
                logger.info(
                    "A device poll failed; polling more slowly.",
                    metadata: ["error.code": error.code.rawValue, "device.interval_s": "\(interval.components.seconds)"])
            }
        }
    }

    private static func deviceCodeExpired() -> AuthSessionError {
        AuthSessionError(.timedOut, "The device code expired before the user approved the sign-in; start a new one.")
    }
}

extension Task where Success == Never, Failure == Never {
    /// `cancelled` when the current task is cancelled.
    static func checkCancellationAsAuthError() throws(AuthSessionError) {
        if Task.isCancelled { throw AuthSessionError(.cancelled, "The device sign-in was cancelled.") }
    }
}
