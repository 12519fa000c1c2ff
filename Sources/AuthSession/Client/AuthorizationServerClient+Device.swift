import FoundationEssentials
import TokenStore

extension AuthorizationServerClient {
    /// The grant type of a device code at the token endpoint (RFC 8628 §3.4).
    static let deviceCodeGrantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// Asks the server's device authorization endpoint for a device code and a user code
    /// (RFC 8628 §3.1): `client_id`, `scope`, the API (`audience` at Auth0, `resource` else) and,
    /// when the session is DPoP-bound, `dpop_jkt` naming the key that will redeem the code
    /// (draft-parecki-oauth-dpop-device-flow; servers that do not know it ignore it).
    ///
    /// Not retried after the request may have reached the server beyond the retry policy's
    /// transient failures: a second code only replaces the first.
    /// - Throws: ``AuthSessionError`` — `unsupportedByServer` (no device authorization
    ///   endpoint), `invalidClient`, `invalidRequest` (`invalid_scope`, …), the network codes,
    ///   `unexpectedResponse`, `insecureConfiguration` (a verification URI that is not https).
    func requestDeviceAuthorization(
        scopes: [String], audience: String?, metadata: AuthorizationServerMetadata
    ) async throws(AuthSessionError) -> DeviceAuthorizationResponse {
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw AuthSessionError(
                .unsupportedByServer,
                "The server offers no device sign-in: its discovery document names no device_authorization_endpoint "
                    + "(RFC 8628). Sign in through the browser, or enable the device grant for the client.")
        }
        var form: [(String, FormValue)] = [
            ("client_id", .text(configuration.clientID)),
            ("scope", .text(scopes.joined(separator: " "))),
        ]
        if let audience, !audience.isEmpty { form.append((configuration.dialect.apiParameterName, .text(audience))) }
        if let dpop { form.append(("dpop_jkt", .text(dpop.key.thumbprint))) }
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        let (responseClass, response) = await send(
            form: configuration.dialect.adding(to: form), endpoint: .deviceAuthorization, to: endpoint)
        switch responseClass {
        case .success:
            guard let response else {
                throw AuthSessionError(.unexpectedResponse, "No answer was kept for a successful request.")
            }
            let answer = try DeviceAuthorizationResponse.decode(
                response.body, status: response.status, receivedAt: retryPolicy.clock.wallClock())
            logger.info(
                "Device authorization granted.",
                metadata: [
                    "oauth.endpoint": Endpoint.deviceAuthorization.rawValue,
                    "device.interval_s": "\(answer.authorization.interval.components.seconds)",
                ])
            return answer
        case .retryable(var error, let serverDelay):
            if let serverDelay { error.retryAfter = retryPolicy.capped(serverDelay: serverDelay) }
            throw error
        case .permanent(let error):
            throw error
        }
    }

    /// One poll of the token endpoint with the device code (RFC 8628 §3.4), at the server's
    /// current endpoints; the answer's ``TokenResponse/servedBy`` names them. One attempt: the
    /// device sign-in paces the polls itself.
    /// - Throws: ``AuthSessionError``; `authorization_pending` and `slow_down` arrive as
    ///   `interactionRequired` with that ``AuthSessionError/oauthError``, `access_denied` as
    ///   `authorizationFailed`, `expired_token` as `timedOut`.
    func pollDeviceCode(_ deviceCode: SecretBytes, scopes: [String]) async throws -> TokenResponse {
        var form: [(String, FormValue)] = [
            ("grant_type", .text(Self.deviceCodeGrantType)),
            ("device_code", .secret(deviceCode)),
            ("client_id", .text(configuration.clientID)),
        ]
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        return try await withoutRetries.requestTokens(form: form, endpoint: .deviceCode, scopes: scopes)
    }
}
