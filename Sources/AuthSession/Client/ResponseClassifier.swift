import FoundationEssentials
import TokenStore

/// Which endpoint an answer came from: the same status means different things at each.
package enum Endpoint: String, Sendable, CaseIterable {
    /// `POST /oauth/token` with the Apple authorization-code exchange grant.
    case tokenExchange
    /// `POST /oauth/token` with `grant_type=authorization_code` (the browser sign-in).
    case authorizationCode
    /// `POST /oauth/token` with `grant_type=refresh_token`.
    case refresh
    /// `POST /oauth/revoke`.
    case revoke
    /// The device authorization endpoint (RFC 8628 §3.1: `POST /oauth/device/code` at Auth0).
    case deviceAuthorization
    /// `POST /oauth/token` with `grant_type=urn:ietf:params:oauth:grant-type:device_code`.
    case deviceCode
    /// The pushed authorization request endpoint (RFC 9126: `POST /oauth/par` at Auth0).
    case pushedAuthorization
}

/// The meaning of one answer or transport failure for the call that got it.
package enum ResponseClass: Sendable {
    /// 2xx: go on and read the answer.
    case success
    /// Worth another attempt (offline, timeout, 408, 429, 5xx); `serverDelay` is the raw delay
    /// the server asked for (`Retry-After` / `X-RateLimit-Reset`), if any.
    case retryable(AuthSessionError, serverDelay: Duration?)
    /// Another attempt would fail the same way.
    case permanent(AuthSessionError)

    /// `success`, `retryable` or `permanent` (for logs and tests).
    package var name: String {
        switch self {
        case .success: return "success"
        case .retryable: return "retryable"
        case .permanent: return "permanent"
        }
    }

    /// The error, unless success.
    package var error: AuthSessionError? {
        switch self {
        case .success: return nil
        case .retryable(let error, _), .permanent(let error): return error
        }
    }
}

/// Pure classification of the authorization server's answers (no I/O, no clock of its own).
package enum ResponseClassifier {
    /// Bodies larger than this are not parsed (an OAuth answer is a few KiB at most).
    package static let maximumBodyBytes = 256 * 1024

    /// Classifies an HTTP answer from `endpoint`.
    package static func classify(
        status: Int, headers: HTTPHeaders, body: Data, endpoint: Endpoint, now: Date
    ) -> ResponseClass {
        switch status {
        case 200..<300:
            return .success
        case 300..<400:
            return .permanent(
                AuthSessionError(
                    .invalidRequest,
                    "The server answered with a redirect, which is never followed for a request carrying a token; "
                        + "check the configured domain.", httpStatus: status))
        case 408:
            return .retryable(
                AuthSessionError(.timedOut, "The server timed out waiting for the request.", httpStatus: status),
                serverDelay: RetryAfter.serverDelay(in: headers, now: now, rateLimitReset: false))
        case 429:
            let oauth = OAuthErrorBody(body)
            return .retryable(
                AuthSessionError(
                    .rateLimited, "The server is rate limiting this client.", httpStatus: status,
                    oauthError: oauth.error, oauthErrorDescription: oauth.description),
                serverDelay: RetryAfter.serverDelay(in: headers, now: now))
        case 500..<600:
            let oauth = OAuthErrorBody(body)
            return .retryable(
                AuthSessionError(
                    .serverError, "The server failed (\(status))." + oauth.excerptSuffix, httpStatus: status,
                    oauthError: oauth.error, oauthErrorDescription: oauth.description),
                serverDelay: RetryAfter.serverDelay(in: headers, now: now, rateLimitReset: false))
        case 400..<500:
            return .permanent(clientError(status: status, body: body, endpoint: endpoint))
        default:
            return .permanent(
                AuthSessionError(.unexpectedResponse, "The server answered with an unexpected status.", httpStatus: status))
        }
    }

    /// Classifies a transport failure: offline and timeouts are retryable; TLS failures,
    /// cancellation and the rest are not retried within the call.
    package static func classify(_ failure: TransportFailure) -> ResponseClass {
        switch failure.kind {
        case .notConnected:
            return .retryable(
                AuthSessionError(
                    .notConnectedToInternet, "The authorization server could not be reached.",
                    cause: .transport(failure)), serverDelay: nil)
        case .timedOut:
            return .retryable(
                AuthSessionError(.timedOut, "The request timed out.", cause: .transport(failure)), serverDelay: nil)
        case .tls:
            return .permanent(
                AuthSessionError(
                    .tlsFailure, "The TLS connection to the authorization server failed.", cause: .transport(failure)))
        case .cancelled:
            return .permanent(AuthSessionError(.cancelled, "The request was cancelled.", cause: .transport(failure)))
        case .other:
            return .permanent(
                AuthSessionError(
                    .unexpectedResponse, "The request failed without a usable answer.", cause: .transport(failure)))
        }
    }

    /// The revocation outcome of a final classification. `retryAfterCap` caps the reported
    /// delay (normally the policy's `maximumRetryAfter`).
    package static func revocationResult(for responseClass: ResponseClass, retryAfterCap: Duration) -> RevocationResult {
        switch responseClass {
        case .success:
            return .revoked
        case .retryable(var error, let serverDelay):
            if let serverDelay { error.retryAfter = min(serverDelay, retryAfterCap) }
            return .retryLater(error)
        case .permanent(let error):
            return error.isTransient ? .retryLater(error) : .failedPermanently(error)
        }
    }

    /// Decodes a token-endpoint answer: a 2xx JSON answer with `access_token` becomes a
    /// ``TokenResponse``; anything else throws the classified error. Never crashes, whatever
    /// the bytes (fuzz target).
    ///
    /// - Throws: ``AuthSessionError`` — ``AuthSessionError/Code/unexpectedResponse`` for a 2xx
    ///   answer that is not the expected JSON (no excerpt of it: it may hold tokens), or the
    ///   code the status and OAuth error mean.
    package static func decodeTokenResponse(
        status: Int, headers: HTTPHeaders, body: Data, endpoint: Endpoint = .refresh,
        requestedScopes: [String] = [], receivedAt: Date = Date()
    ) throws(AuthSessionError) -> TokenResponse {
        switch classify(status: status, headers: headers, body: body, endpoint: endpoint, now: receivedAt) {
        case .success:
            break
        case .retryable(var error, let serverDelay):
            error.retryAfter = serverDelay
            throw error
        case .permanent(let error):
            throw error
        }
        guard body.count <= maximumBodyBytes else {
            throw AuthSessionError(
                .unexpectedResponse, "The token answer is too large (\(body.count) bytes).", httpStatus: status)
        }
        guard let object = jsonObject(body) else {
            throw AuthSessionError(
                .unexpectedResponse, "The token answer is not a JSON object (\(body.count) bytes).", httpStatus: status)
        }
        guard let access = object["access_token"]?.string, !access.isEmpty else {
            throw AuthSessionError(
                .unexpectedResponse, "The token answer has no access_token.", httpStatus: status)
        }
        func secret(_ key: String) throws(AuthSessionError) -> SecretBytes? {
            guard let value = object[key], value != .null else { return nil }
            guard let text = value.string else {
                throw AuthSessionError(.unexpectedResponse, "The token answer's \(key) is not a string.", httpStatus: status)
            }
            return text.isEmpty ? nil : SecretBytes(utf8: text)
        }
        let refresh = try secret("refresh_token")
        let idToken = try secret("id_token")
        let tokenType = object["token_type"]?.string.map { TextSanitizer.sanitize($0, limit: 32) } ?? "Bearer"
        let expiresIn = expiresInSeconds(object["expires_in"]).map { Duration.seconds($0) }
        let expiresAt = expiresInSeconds(object["expires_in"]).map { receivedAt.addingTimeInterval(TimeInterval($0)) }
        let scopeValue = object["scope"]?.string
        let granted = scopeValue.map(TokenResponse.scopes(from:)) ?? requestedScopes
        return TokenResponse(
            accessToken: SecretBytes(utf8: access), refreshToken: refresh, idToken: idToken, tokenType: tokenType,
            expiresIn: expiresIn, expiresAt: expiresAt, grantedScopes: granted, scopeWasReturned: scopeValue != nil)
    }

    // MARK: - Implementation

    private static func clientError(status: Int, body: Data, endpoint: Endpoint) -> AuthSessionError {
        let oauth = OAuthErrorBody(body)
        func make(_ code: AuthSessionError.Code, _ message: String) -> AuthSessionError {
            AuthSessionError(
                code, message, httpStatus: status, oauthError: oauth.error, oauthErrorDescription: oauth.description)
        }
        if endpoint == .pushedAuthorization, oauth.error != "invalid_client", status != 401 {
            // RFC 9126 2.3: the authorization request itself was refused (scope, redirect URI,
            // response type, client): a configuration matter, as the same error on the redirect.
            return make(
                .authorizationMisconfigured,
                "The server refused the pushed authorization request (\(status))." + (oauth.isJSON ? "" : oauth.excerptSuffix))
        }
        switch oauth.error {
        case "invalid_grant":
            switch endpoint {
            case .refresh:
                return make(
                    .interactionRequired,
                    "The refresh token was refused (expired, revoked or reused): the user must sign in again.")
            case .tokenExchange:
                return make(.invalidGrant, "The Apple authorization code was refused (wrong, expired or already used).")
            case .authorizationCode:
                return make(
                    .invalidGrant,
                    "The authorization code was refused (wrong, expired or already used, or the PKCE verifier or "
                        + "redirect URI did not match).")
            case .revoke, .pushedAuthorization, .deviceAuthorization:
                return make(.invalidRequest, "The request was refused (invalid_grant).")
            case .deviceCode:
                return make(.invalidGrant, "The device code was refused (wrong, expired or already used).")
            }
        case "authorization_pending" where endpoint == .deviceCode, "slow_down" where endpoint == .deviceCode:
            // RFC 8628 3.5: not approved yet; the device sign-in polls on (this never leaves it).
            return make(.interactionRequired, "The user has not approved the device sign-in yet.")
        case "access_denied" where endpoint == .deviceCode:
            return make(.authorizationFailed, "The user declined the device sign-in.")
        case "expired_token" where endpoint == .deviceCode:
            return make(.timedOut, "The device code expired before the user approved the sign-in; start a new one.")
        case "interaction_required", "login_required", "consent_required", "mfa_required":
            guard endpoint != .revoke else { break }
            // OpenID Connect's "the user must act" errors (Auth0 sends them from the token
            // endpoint when a rule or Action asks for MFA or consent). The refresh token is not
            // refused: after the interactive sign-in the app has a new one anyway.
            return make(
                .interactionRequired,
                "The server asks the user to act (multi-factor, consent or a fresh login): show the interactive sign-in.")
        case "invalid_client", "unauthorized_client":
            return make(.invalidClient, "The server refused the client's credentials; check the client id and secret.")
        case "unsupported_token_type":
            return make(.unsupportedTokenType, "The server does not support revoking this kind of token.")
        case "invalid_request", "unsupported_grant_type", "invalid_scope":
            return make(.invalidRequest, "The server refused the request as malformed.")
        case "access_denied" where endpoint == .tokenExchange || endpoint == .authorizationCode:
            return make(.invalidGrant, "The server denied the authorization-code exchange.")
        default:
            break
        }
        if status == 401 {
            return make(.invalidClient, "The server refused the client's credentials (401)." + oauth.excerptSuffix)
        }
        if oauth.isJSON {
            return make(.invalidRequest, "The server refused the request (\(status)).")
        }
        return make(.unexpectedResponse, "The server refused the request (\(status)) without an OAuth error." + oauth.excerptSuffix)
    }

    static func jsonObject(_ body: Data) -> [String: JSONValue]? {
        guard !body.isEmpty, body.count <= maximumBodyBytes else { return nil }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            return nil  // Not JSON: the caller reports unexpectedResponse with the size, no content.
        }
        return value.object
    }

    /// `expires_in` as whole seconds in `0...10 years`: a number, or a string of digits.
    private static func expiresInSeconds(_ value: JSONValue?) -> Int64? {
        let tenYears: Double = 315_576_000
        // A JSON boolean is never a number here (JSONValue keeps them apart).
        if case .number(let double) = value {
            guard double.isFinite, double >= 0 else { return nil }
            return Int64(min(double, tenYears))
        }
        if let text = value?.string, !text.isEmpty, text.count <= 12, text.allSatisfy({ $0.isASCII && $0.isNumber }),
            let seconds = Double(text)
        {
            return Int64(min(seconds, tenYears))
        }
        return nil
    }
}

/// The OAuth error fields of an error answer, read defensively.
struct OAuthErrorBody {
    /// `error`, when the body is a JSON object with a string `error`.
    let error: String?
    /// `error_description`, when present.
    let description: String?
    /// Whether the body parsed as a JSON object.
    let isJSON: Bool
    /// ` Body starts: "…".` with a short sanitized excerpt of a non-JSON body, or empty.
    let excerptSuffix: String

    init(_ body: Data) {
        if let object = ResponseClassifier.jsonObject(body) {
            isJSON = true
            error = object["error"]?.string.map { TextSanitizer.sanitize($0, limit: 64) }
            description = object["error_description"]?.string.map { TextSanitizer.sanitize($0) }
            excerptSuffix = ""
        } else {
            isJSON = false
            error = nil
            description = nil
            let excerpt = TextSanitizer.sanitize(bytes: body.prefix(512), limit: 60)
            excerptSuffix = excerpt.isEmpty ? "" : " Body starts: \"\(excerpt)\"."
        }
    }
}
