import TokenStore

/// The one error type of the `AuthSession` module.
///
/// Errors are for the app's developers, in the spirit of MSAL's guidance: each has a stable
/// ``Code`` an app switches on, the HTTP status and the OAuth `error` / `error_description`
/// when the server gave them (sanitized: printable ASCII, short, token-like runs redacted),
/// the delay the server asked for, the scopes granted and declined, and the underlying
/// cause. No token, request body or response body is ever held verbatim in the text.
///
/// Match with the static errors below, which compare by code only (details and cause are
/// ignored). A store failure arrives as ``storage`` with the `TokenStoreError` in ``cause``;
/// `catch TokenStoreError.keyringLocked` matches it too. Codes are not an enum: a `switch`
/// needs a `default:`.
///
/// ```swift
/// do { _ = try await client.refresh(token, scopes: ["openid"]) }
/// catch AuthSessionError.interactionRequired { /* sign the user in again */ }
/// catch AuthSessionError.notConnectedToInternet { /* try again when online */ }
/// catch TokenStoreError.keyringLocked { /* ask the user to unlock */ }
/// catch let error as AuthSessionError where error.isTransient { /* try again later */ }
/// // In tests: #expect(throws: AuthSessionError.invalidGrant) { try await … }
/// ```
public struct AuthSessionError: CodedError {
    /// A stable error code. Not an enum: a later version may add codes, so a `switch` over
    /// codes needs a `default:`. The raw values never change (`tokenctl --json` prints them).
    public struct Code: ErrorCode {
        /// The raw value, e.g. `"interactionRequired"`.
        public let rawValue: String

        /// Makes a code from its raw value.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The user must sign in again: no refresh token is stored, or the server answered
        /// `invalid_grant` to a refresh (expired, revoked or reused token).
        public static let interactionRequired = Code(rawValue: "interactionRequired")
        /// The server did not grant a scope the call required (`requiringScopes:`).
        /// ``AuthSessionError/grantedScopes`` and ``AuthSessionError/declinedScopes`` say
        /// which; ``AuthSessionError/grantedAccessToken`` holds the token for the granted ones.
        public static let serverDeclinedScopes = Code(rawValue: "serverDeclinedScopes")
        /// The minimum TTL asked for is longer than the server's access tokens live, so no
        /// refresh can satisfy it (Auth0.swift's `largeMinTTL`). ``AuthSessionError/tokenLifetime``
        /// holds the lifetime the server gives; ask with a shorter minimum TTL.
        public static let minimumTTLTooLarge = Code(rawValue: "minimumTTLTooLarge")
        /// The host could not be reached: no network, DNS failure, connection refused,
        /// reset or lost. Retry when the network is back.
        public static let notConnectedToInternet = Code(rawValue: "notConnectedToInternet")
        /// The request or the answer did not complete in time (client timeout or HTTP 408).
        public static let timedOut = Code(rawValue: "timedOut")
        /// The server answered 429. ``AuthSessionError/retryAfter`` says when to try again,
        /// when the server said so.
        public static let rateLimited = Code(rawValue: "rateLimited")
        /// The server answered 5xx.
        public static let serverError = Code(rawValue: "serverError")
        /// The server rejected the client's credentials (`invalid_client`,
        /// `unauthorized_client`): a configuration error.
        public static let invalidClient = Code(rawValue: "invalidClient")
        /// The server rejected the request as malformed (`invalid_request`, unsupported grant
        /// type, a redirect, or another 4xx): a configuration or programming error.
        public static let invalidRequest = Code(rawValue: "invalidRequest")
        /// The revocation endpoint does not support revoking this kind of token.
        public static let unsupportedTokenType = Code(rawValue: "unsupportedTokenType")
        /// The server answered `invalid_grant` to an authorization-code exchange: the Apple
        /// authorization code is wrong, expired or already used. Nothing was stored.
        public static let invalidGrant = Code(rawValue: "invalidGrant")
        /// The answer was not what the protocol promises (not JSON, a missing field, a
        /// redirect, an unknown status). Only a short sanitized excerpt is kept.
        public static let unexpectedResponse = Code(rawValue: "unexpectedResponse")
        /// The TLS handshake failed or the server's certificate was refused.
        public static let tlsFailure = Code(rawValue: "tlsFailure")
        /// The operation was cancelled (task cancellation).
        public static let cancelled = Code(rawValue: "cancelled")
        /// The configuration is refused before any request: plain `http://` to a host that is
        /// not loopback, a URL without a host, an empty client id.
        public static let insecureConfiguration = Code(rawValue: "insecureConfiguration")
        /// A local storage error; ``AuthSessionError/cause`` holds the `TokenStoreError`.
        public static let storage = Code(rawValue: "storage")
        /// The browser sign-in came back with an OAuth error on the redirect (`error=`):
        /// `access_denied` when the user declined, or another error of the server.
        /// ``AuthSessionError/oauthError`` and ``AuthSessionError/oauthErrorDescription``
        /// hold the server's text (sanitized), which the app may show as untrusted text.
        public static let authorizationFailed = Code(rawValue: "authorizationFailed")
        /// The browser sign-in ended without an answer, and every redirect that reached the
        /// loopback listener carried a wrong or missing `state` (a stale tab of an earlier
        /// sign-in, or a forged request). Each one was refused with an error page.
        public static let stateMismatch = Code(rawValue: "stateMismatch")
        /// The ID token failed a validation check; ``AuthSessionError/idTokenCheck`` names
        /// which. The token and its claims are never part of the error.
        public static let idTokenInvalid = Code(rawValue: "idTokenInvalid")
        /// None of the configured loopback ports could be bound for the redirect listener
        /// (each one in use, or the loopback interface unusable).
        public static let loopbackUnavailable = Code(rawValue: "loopbackUnavailable")
        /// No way to open the user's browser worked (`$BROWSER`, GIO, `xdg-open`).
        public static let browserUnavailable = Code(rawValue: "browserUnavailable")
        /// A sign-in into an account that already has a user signed another user in (another
        /// `sub`), and the app did not allow a change (`allowsUserChange`). Nothing was stored
        /// and the new refresh token was revoked: the account keeps its user.
        public static let userChanged = Code(rawValue: "userChanged")

        /// The server has no revocation endpoint (its discovery document names none): a
        /// refresh token can only be deleted locally, never revoked (Microsoft Entra).
        public static let notRevocable = Code(rawValue: "notRevocable")
        /// The authorization endpoint refused the sign-in request itself (`invalid_scope`,
        /// `unauthorized_client`, `invalid_request`, `unsupported_response_type` on the
        /// redirect): a configuration error that retrying or another user will not fix, not a
        /// user who declined. ``AuthSessionError/oauthError`` and
        /// ``AuthSessionError/oauthErrorDescription`` hold the server's (untrusted) text.
        public static let authorizationMisconfigured = Code(rawValue: "authorizationMisconfigured")
        /// The sign-in redirect's `iss` (RFC 9207) was missing or named another issuer, while
        /// the server says it sends one: the answer may come from another server (mix-up). Also
        /// an API whose protected resource metadata (RFC 9728) does not name the configured
        /// issuer among its `authorization_servers`: it is never followed to another server.
        public static let issuerMismatch = Code(rawValue: "issuerMismatch")
        /// The app must act, sign the user in again: the DPoP key (RFC 9449) the account's
        /// refresh token is bound to is gone from the store, changed, or unusable here. The
        /// account's session was cleared locally (a new key is never made for an old session).
        public static let dpopKeyLost = Code(rawValue: "dpopKeyLost")
        /// The server does not offer what the call needs: a device sign-in with a server whose
        /// discovery document names no `device_authorization_endpoint` (RFC 8628). A
        /// configuration matter: sign in through the browser instead, or enable the grant.
        public static let unsupportedByServer = Code(rawValue: "unsupportedByServer")
        /// The app must act, sign the user in again with stronger or more recent authentication:
        /// the API answered `insufficient_user_authentication` (RFC 9470). Run a sign-in with
        /// ``AuthSessionError/requiredACRValues`` (`acr_values`) and
        /// ``AuthSessionError/requiredMaxAge`` (`max_age`), then make the call again. In the
        /// interaction-required group (``AuthSessionError/requiresInteraction``); the stored
        /// session is kept.
        public static let stepUpRequired = Code(rawValue: "stepUpRequired")
        /// The API refused the access token again after one forced renewal (`invalid_token` to
        /// the retry too): the token is not for this API (its audience or scopes), or the API
        /// does not trust this authorization server. A configuration matter; the session is kept.
        public static let accessTokenRejected = Code(rawValue: "accessTokenRejected")

        /// Every code this version defines, in a stable order. A later version may add more.
        public static let allCases: [Code] = [
            .interactionRequired, .serverDeclinedScopes, .notConnectedToInternet, .timedOut,
            .rateLimited, .serverError, .invalidClient, .invalidRequest, .unsupportedTokenType,
            .invalidGrant, .unexpectedResponse, .tlsFailure, .cancelled, .insecureConfiguration,
            .storage, .authorizationFailed, .stateMismatch, .idTokenInvalid, .loopbackUnavailable,
            .browserUnavailable, .minimumTTLTooLarge, .userChanged, .notRevocable, .authorizationMisconfigured,
            .issuerMismatch, .dpopKeyLost, .unsupportedByServer, .stepUpRequired, .accessTokenRejected,
        ]
    }

    /// The underlying cause of an error, kept for diagnosis. Holds no secret.
    public enum Cause: Sendable, CustomStringConvertible {
        /// A transport failure, with the original system error attached.
        case transport(TransportFailure)
        /// An error from the token store.
        case storage(TokenStoreError)
        /// Any other cause, already described without secrets.
        case other(String)

        /// A one-line description without secrets.
        public var description: String {
            switch self {
            case .transport(let failure): return failure.description
            case .storage(let error): return error.description
            case .other(let text): return text
            }
        }
    }

    /// The stable code.
    public let code: Code
    /// What went wrong, for a developer. Never contains a token or a body verbatim.
    public let message: String
    /// The HTTP status of the answer, when there was one.
    public let httpStatus: Int?
    /// The OAuth `error` field of the answer (sanitized), when there was one.
    public let oauthError: String?
    /// The OAuth `error_description` (sanitized: printable ASCII, at most 120 characters,
    /// token-like runs redacted), when there was one.
    ///
    /// - Important: untrusted text. On the browser sign-in's redirect it is whatever the
    ///   sender of the redirect chose (a page the user visited can send one); an app that
    ///   shows it must present it as the server's words, never as instructions of the app
    ///   (no phone numbers or links to act on), and decide on ``code`` and ``oauthError``.
    public let oauthErrorDescription: String?
    /// How long the server asked to wait before the next attempt (`Retry-After` or
    /// `X-RateLimit-Reset`), already capped by the ``RetryPolicy``.
    public internal(set) var retryAfter: Duration?
    /// For ``Code/serverDeclinedScopes``: the scopes the server granted.
    public let grantedScopes: [String]?
    /// For ``Code/serverDeclinedScopes``: the requested scopes the server did not grant.
    public let declinedScopes: [String]?
    /// For ``Code/serverDeclinedScopes``: the access token for the granted scopes (also
    /// stored in the cache), so the app can go on with those.
    public internal(set) var grantedAccessToken: AccessToken?
    /// The underlying cause, when there is one.
    public let cause: Cause?
    /// For ``Code/idTokenInvalid``: the check the ID token failed.
    public internal(set) var idTokenCheck: IDTokenCheck?
    /// For ``Code/minimumTTLTooLarge``: how long the server's access tokens live.
    public internal(set) var tokenLifetime: Duration?
    /// For ``Code/stepUpRequired``: the API's `acr_values`, most wanted first (empty when it
    /// named none): pass them to the sign-in.
    public internal(set) var requiredACRValues: [String]?
    /// For ``Code/stepUpRequired``: the API's `max_age`, when it named one: pass it to the sign-in.
    public internal(set) var requiredMaxAge: Duration?

    /// Makes an error. `oauthError` and `oauthErrorDescription` are sanitized here.
    public init(
        _ code: Code, _ message: String, httpStatus: Int? = nil, oauthError: String? = nil,
        oauthErrorDescription: String? = nil, retryAfter: Duration? = nil,
        grantedScopes: [String]? = nil, declinedScopes: [String]? = nil, cause: Cause? = nil
    ) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        // A registered OAuth error code is kept as it is, however long (`unsupported_response_type`
        // is 25 characters: the token-like-run rule would redact it).
        self.oauthError = oauthError.map {
            Self.registeredOAuthErrors.contains($0) ? $0 : TextSanitizer.sanitize($0, limit: 64)
        }
        self.oauthErrorDescription = oauthErrorDescription.map { TextSanitizer.sanitize($0) }
        self.retryAfter = retryAfter
        self.grantedScopes = grantedScopes
        self.declinedScopes = declinedScopes
        self.cause = cause
    }

    /// An error wrapping a `TokenStoreError` (code ``Code/storage``).
    public static func storage(_ error: TokenStoreError) -> AuthSessionError {
        AuthSessionError(.storage, "The token store failed.", cause: .storage(error))
    }

    /// An error for ``Code/serverDeclinedScopes`` with the two lists.
    public static func serverDeclinedScopes(granted: [String], declined: [String]) -> AuthSessionError {
        AuthSessionError(
            .serverDeclinedScopes,
            "The server granted fewer scopes than requested.",
            grantedScopes: granted, declinedScopes: declined)
    }

    /// An error for ``Code/idTokenInvalid`` naming the failed check (never the token or a claim).
    public static func idTokenInvalid(check: IDTokenCheck) -> AuthSessionError {
        var error = AuthSessionError(.idTokenInvalid, "The ID token failed the \(check.rawValue) check: \(check.summary)")
        error.idTokenCheck = check
        return error
    }

    /// An error for ``Code/stepUpRequired`` carrying what the API asked for (RFC 9470) in its
    /// answer of status `httpStatus`.
    public static func stepUpRequired(acrValues: [String], maxAge: Duration?, httpStatus: Int = 401) -> AuthSessionError {
        var error = AuthSessionError(
            .stepUpRequired,
            "The API asks for a stronger or more recent sign-in (insufficient_user_authentication): sign in again with "
                + "the required acr_values and max_age, then retry.",
            httpStatus: httpStatus, oauthError: "insufficient_user_authentication")
        error.requiredACRValues = acrValues
        error.requiredMaxAge = maxAge
        return error
    }

    /// True when the user must act before the call can succeed (MSAL's "UI required" group):
    /// ``Code/interactionRequired``, ``Code/dpopKeyLost``, ``Code/stepUpRequired``.
    public var requiresInteraction: Bool {
        code == .interactionRequired || code == .dpopKeyLost || code == .stepUpRequired
    }

    /// True when the call failed for now and succeeds once the user acts, without signing in
    /// again (MSAL's "temporary, retry after the user acts" group): a ``Code/storage`` error whose
    /// store error is `storeLocked` (the store or the session is locked: unlock it),
    /// `userPresenceDenied` (the presence prompt was dismissed: ask again) or `keyringLocked`
    /// (the keyring holding the data key is locked). Nothing was changed; retry after the user acts.
    public var isRetryableAfterUserAction: Bool {
        guard code == .storage, case .storage(let error)? = cause else { return false }
        return [.storeLocked, .userPresenceDenied, .keyringLocked].contains(error.code)
    }

    /// A ``Code/storage`` error whose store error is `storeLocked`.
    var isStoreLocked: Bool {
        guard code == .storage, case .storage(let error)? = cause else { return false }
        return error.code == .storeLocked
    }

    /// True for failures worth trying again later: offline, timed out, rate limited,
    /// 5xx, a TLS failure (often a captive portal or a clock error) and cancellation.
    /// Configuration errors and `invalid_grant` are not.
    public var isTransient: Bool {
        switch code {
        case .notConnectedToInternet, .timedOut, .rateLimited, .serverError, .tlsFailure, .cancelled:
            return true
        default:
            return false
        }
    }

    /// `AuthSessionError.<code>: message (HTTP 400, invalid_request: "…") …` — never a token.
    public var description: String {
        var text = descriptionHead
        var details: [String] = []
        if let httpStatus { details.append("HTTP \(httpStatus)") }
        if let oauthError {
            var item = oauthError
            if let oauthErrorDescription { item += ": \"\(oauthErrorDescription)\"" }
            details.append(item)
        }
        if let retryAfter { details.append("retry after \(Self.format(retryAfter))") }
        if !details.isEmpty { text += " (" + details.joined(separator: ", ") + ")" }
        if let grantedScopes { text += " granted: [\(grantedScopes.joined(separator: " "))]" }
        if let declinedScopes { text += " declined: [\(declinedScopes.joined(separator: " "))]" }
        if let cause { text += " Cause: \(cause)" }
        return text
    }

    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

/// Turns server-supplied text into something safe to show: printable ASCII only, runs that
/// look like a token (24 or more characters of `[A-Za-z0-9._~+/=-]`) replaced by
/// `[redacted]`, at most `limit` characters.
enum TextSanitizer {
    static let defaultLimit = 120

    static func sanitize(_ text: String, limit: Int = defaultLimit) -> String {
        sanitize(bytes: Array(text.utf8), limit: limit)
    }

    static func sanitize<Bytes: Collection>(bytes: Bytes, limit: Int = defaultLimit) -> String
    where Bytes.Element == UInt8 {
        // Look at a bounded prefix only: enough to fill `limit` even after redactions.
        var printable: [UInt8] = []
        printable.reserveCapacity(min(bytes.count, 4096))
        var lastWasSpace = false
        for byte in bytes.prefix(4096) {
            let isPrintable = byte >= 0x20 && byte < 0x7F
            let mapped: UInt8 = isPrintable ? byte : 0x20
            if mapped == 0x20 {
                if lastWasSpace { continue }
                lastWasSpace = true
            } else {
                lastWasSpace = false
            }
            printable.append(mapped)
        }
        // Redact token-like runs.
        var output = ""
        var run: [UInt8] = []
        func flush() {
            if run.count >= 24 {
                output += "[redacted]"
            } else {
                output += String(decoding: run, as: UTF8.self)
            }
            run.removeAll(keepingCapacity: true)
        }
        for byte in printable {
            if isTokenCharacter(byte) {
                run.append(byte)
            } else {
                flush()
                output.unicodeScalars.append(Unicode.Scalar(byte))
            }
            if output.count > limit + 16 { break }
        }
        flush()
        output = output.trimmingSpaces()
        if output.count > limit {
            output = String(output.prefix(max(0, limit - 1))) + "…"
        }
        return output
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"),
            UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while scalars.first == " " { scalars.removeFirst() }
        while scalars.last == " " { scalars.removeLast() }
        return String(scalars)
    }
}
