import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

/// Pure classification of the authorization server's answers and of transport failures
/// (the `revocation_responses` list of TESTING.md, without the network), token-answer
/// decoding, declined scopes, sanitizing and configuration validation.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ClassificationTests {
    static let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
    static let cap = Duration.seconds(60)

    enum Expected: Equatable, CustomStringConvertible {
        case revoked
        case retry(AuthSessionError.Code, retryAfter: Duration?)
        case permanent(AuthSessionError.Code)
        var description: String {
            switch self {
            case .revoked: return "revoked"
            case .retry(let code, let after): return "retry(\(code), \(after.map { "\($0)" } ?? "nil"))"
            case .permanent(let code): return "permanent(\(code))"
            }
        }
    }

    struct Case: CustomStringConvertible, Sendable {
        let name: String
        let status: Int
        let headers: [String: String]
        let body: String
        let expected: Expected
        var description: String { name }
    }

    static func observed(_ result: RevocationResult) -> Expected {
        switch result {
        case .revoked: return .revoked
        case .retryLater(let error): return .retry(error.code, retryAfter: error.retryAfter)
        case .failedPermanently(let error): return .permanent(error.code)
        }
    }

    static func json(_ error: String) -> String { "{\"error\":\"\(error)\",\"error_description\":\"described\"}" }

    static let httpCases: [Case] = [
        Case(name: "200 empty", status: 200, headers: [:], body: "", expected: .revoked),
        Case(name: "200 unknown token {}", status: 200, headers: [:], body: "{}", expected: .revoked),
        Case(name: "200 non-JSON", status: 200, headers: [:], body: "OK, revoked", expected: .revoked),
        Case(name: "200 binary garbage", status: 200, headers: [:], body: "\u{0}\u{1}\u{FFFD}{{{", expected: .revoked),
        Case(name: "204 no content", status: 204, headers: [:], body: "", expected: .revoked),
        Case(name: "400 invalid_request", status: 400, headers: [:], body: json("invalid_request"), expected: .permanent(.invalidRequest)),
        Case(name: "400 unsupported_token_type", status: 400, headers: [:], body: json("unsupported_token_type"), expected: .permanent(.unsupportedTokenType)),
        Case(name: "400 invalid_grant at revoke", status: 400, headers: [:], body: json("invalid_grant"), expected: .permanent(.invalidRequest)),
        Case(name: "400 non-JSON", status: 400, headers: [:], body: "<html>Bad Request</html>", expected: .permanent(.unexpectedResponse)),
        Case(name: "401 invalid_client", status: 401, headers: [:], body: json("invalid_client"), expected: .permanent(.invalidClient)),
        Case(name: "401 empty", status: 401, headers: [:], body: "", expected: .permanent(.invalidClient)),
        Case(name: "403 html", status: 403, headers: [:], body: "<h1>Forbidden</h1>", expected: .permanent(.unexpectedResponse)),
        Case(name: "404", status: 404, headers: [:], body: "Not Found", expected: .permanent(.unexpectedResponse)),
        Case(name: "408", status: 408, headers: [:], body: "", expected: .retry(.timedOut, retryAfter: nil)),
        Case(name: "429 no Retry-After", status: 429, headers: [:], body: json("too_many_requests"), expected: .retry(.rateLimited, retryAfter: nil)),
        Case(name: "429 Retry-After seconds", status: 429, headers: ["Retry-After": "7"], body: "", expected: .retry(.rateLimited, retryAfter: .seconds(7))),
        Case(name: "429 IMF-fixdate", status: 429, headers: ["Retry-After": "Sun, 06 Nov 1994 08:50:07 GMT"], body: "", expected: .retry(.rateLimited, retryAfter: .seconds(30))),
        Case(name: "429 RFC 850", status: 429, headers: ["Retry-After": "Sunday, 06-Nov-94 08:50:07 GMT"], body: "", expected: .retry(.rateLimited, retryAfter: .seconds(30))),
        Case(name: "429 asctime", status: 429, headers: ["Retry-After": "Sun Nov  6 08:50:07 1994"], body: "", expected: .retry(.rateLimited, retryAfter: .seconds(30))),
        Case(name: "429 past date", status: 429, headers: ["Retry-After": "Sun, 06 Nov 1994 08:00:00 GMT"], body: "", expected: .retry(.rateLimited, retryAfter: .zero)),
        Case(name: "429 garbage Retry-After", status: 429, headers: ["Retry-After": "in a while"], body: "", expected: .retry(.rateLimited, retryAfter: nil)),
        Case(name: "429 huge Retry-After", status: 429, headers: ["Retry-After": "999999999999"], body: "", expected: .retry(.rateLimited, retryAfter: cap)),
        Case(name: "429 X-RateLimit-Reset", status: 429, headers: ["X-RateLimit-Reset": "784111797"], body: "", expected: .retry(.rateLimited, retryAfter: .seconds(20))),
        Case(name: "500 with X-RateLimit-Reset (not a wait)", status: 500, headers: ["X-RateLimit-Reset": "784111897"], body: "", expected: .retry(.serverError, retryAfter: nil)),
        Case(name: "500", status: 500, headers: [:], body: "Internal Server Error", expected: .retry(.serverError, retryAfter: nil)),
        Case(name: "502 html", status: 502, headers: [:], body: "<html>Bad Gateway</html>", expected: .retry(.serverError, retryAfter: nil)),
        Case(name: "503 Retry-After", status: 503, headers: ["Retry-After": "5"], body: "", expected: .retry(.serverError, retryAfter: .seconds(5))),
        Case(name: "504", status: 504, headers: [:], body: "", expected: .retry(.serverError, retryAfter: nil)),
        Case(name: "301 redirect", status: 301, headers: ["Location": "https://elsewhere.example/oauth/revoke"], body: "", expected: .permanent(.invalidRequest)),
        Case(name: "302 redirect", status: 302, headers: ["Location": "https://elsewhere.example/"], body: "", expected: .permanent(.invalidRequest)),
        Case(name: "307 redirect", status: 307, headers: ["Location": "http://evil.example/"], body: "", expected: .permanent(.invalidRequest)),
        Case(name: "308 redirect", status: 308, headers: ["Location": "/other"], body: "", expected: .permanent(.invalidRequest)),
        Case(name: "101 informational", status: 101, headers: [:], body: "", expected: .permanent(.unexpectedResponse)),
    ]

    @Test(arguments: httpCases)
    func revocationAnswer(_ item: Case) {
        let responseClass = ResponseClassifier.classify(
            status: item.status, headers: HTTPHeaders(item.headers), body: Data(item.body.utf8), endpoint: .revoke,
            now: Self.now)
        let result = ResponseClassifier.revocationResult(for: responseClass, retryAfterCap: Self.cap)
        #expect(Self.observed(result) == item.expected, "\(item.name): got \(result)")
        if let error = result.error, item.status != 101 {
            #expect(error.httpStatus == item.status)
        }
    }

    /// libcurl result codes (`CURLcode` values, stable across libcurl versions) and what a
    /// revocation makes of each.
    static let transportCases: [(UInt32, Expected)] = [
        (6, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_COULDNT_RESOLVE_HOST
        (5, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_COULDNT_RESOLVE_PROXY
        (7, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_COULDNT_CONNECT
        (52, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_GOT_NOTHING (EOF before an answer)
        (56, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_RECV_ERROR (reset)
        (55, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_SEND_ERROR
        (18, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_PARTIAL_FILE (body cut short)
        (8, .retry(.notConnectedToInternet, retryAfter: nil)),  // CURLE_WEIRD_SERVER_REPLY
        (28, .retry(.timedOut, retryAfter: nil)),  // CURLE_OPERATION_TIMEDOUT
        (35, .retry(.tlsFailure, retryAfter: nil)),  // CURLE_SSL_CONNECT_ERROR
        (60, .retry(.tlsFailure, retryAfter: nil)),  // CURLE_PEER_FAILED_VERIFICATION
        (42, .retry(.cancelled, retryAfter: nil)),  // CURLE_ABORTED_BY_CALLBACK
        (1, .permanent(.unexpectedResponse)),  // CURLE_UNSUPPORTED_PROTOCOL
        (3, .permanent(.unexpectedResponse)),  // CURLE_URL_MALFORMAT
    ]

    @Test(arguments: transportCases)
    func transportFailure(code: UInt32, expected: Expected) {
        let failure = CurlTransport.failure(forCurlCode: code, cancelled: false)
        let result = ResponseClassifier.revocationResult(
            for: ResponseClassifier.classify(failure), retryAfterCap: Self.cap)
        #expect(Self.observed(result) == expected, "\(code): got \(result)")
        // The original error stays attached.
        guard case .transport(let attached)? = result.error?.cause else {
            Issue.record("no transport cause")
            return
        }
        #expect((attached.underlying as? CurlError)?.code == Int(code))
    }

    @Test func ourCancellationIsACancellation() {
        // A transfer stopped by our cancellation reports the code of whatever it was doing.
        #expect(CurlTransport.failure(forCurlCode: 23, cancelled: true).kind == .cancelled)  // CURLE_WRITE_ERROR
        #expect(CurlTransport.failure(forCurlCode: 23, cancelled: false).kind == .other)
    }

    @Test func atLeastTwentyFiveCases() {
        print("METRIC revocation_classification cases=\(Self.httpCases.count + Self.transportCases.count)")
        #expect(Self.httpCases.count + Self.transportCases.count >= 25)
    }

    // MARK: - Token endpoint

    @Test(arguments: [
        (Endpoint.refresh, 400, AuthSessionError.Code.interactionRequired),
        (.refresh, 403, .interactionRequired),  // Auth0 answers 403 invalid_grant for a bad refresh token
        (.tokenExchange, 400, .invalidGrant),
    ])
    func invalidGrant(endpoint: Endpoint, status: Int, code: AuthSessionError.Code) {
        let body = Data(#"{"error":"invalid_grant","error_description":"Unknown or invalid refresh token."}"#.utf8)
        #expect {
            _ = try ResponseClassifier.decodeTokenResponse(status: status, headers: [:], body: body, endpoint: endpoint)
        } throws: { error in
            guard let error = error as? AuthSessionError else { return false }
            return error.code == code && error.oauthError == "invalid_grant"
                && error.oauthErrorDescription == "Unknown or invalid refresh token." && error.httpStatus == status
        }
    }

    @Test("OIDC's user-must-act errors are interactionRequired at the token endpoint, not invalidRequest",
          arguments: ["interaction_required", "login_required", "consent_required", "mfa_required"])
    func userMustAct(oauthError: String) {
        let body = Data(#"{"error":"\#(oauthError)","error_description":"Multifactor authentication required"}"#.utf8)
        for (endpoint, status) in [(Endpoint.refresh, 403), (.refresh, 400), (.tokenExchange, 403)] {
            #expect {
                _ = try ResponseClassifier.decodeTokenResponse(status: status, headers: [:], body: body, endpoint: endpoint)
            } throws: { error in
                guard let error = error as? AuthSessionError else { return false }
                return error.code == .interactionRequired && error.oauthError == oauthError && error.httpStatus == status
            }
        }
    }

    @Test func decodesAFullAnswer() throws {
        let body = Data(
            #"{"access_token":"at-1","refresh_token":"rt-1","id_token":"h.p.s","token_type":"Bearer","expires_in":3600,"scope":"openid offline_access"}"#
                .utf8)
        let received = Date(timeIntervalSince1970: 1_000)
        let tokens = try ResponseClassifier.decodeTokenResponse(
            status: 200, headers: [:], body: body, requestedScopes: ["openid", "offline_access", "read:items"],
            receivedAt: received)
        #expect(tokens.accessToken == SecretBytes(utf8: "at-1"))
        #expect(tokens.refreshToken == SecretBytes(utf8: "rt-1"))
        #expect(tokens.idToken == SecretBytes(utf8: "h.p.s"))
        #expect(tokens.tokenType == "Bearer")
        #expect(tokens.expiresIn == .seconds(3600))
        #expect(tokens.expiresAt == Date(timeIntervalSince1970: 4_600))
        #expect(tokens.grantedScopes == ["openid", "offline_access"])
        #expect(tokens.scopeWasReturned)
        #expect(tokens.declinedScopes(requested: ["openid", "offline_access", "read:items"]) == ["read:items"])
    }

    @Test func absentScopeMeansRequested() throws {
        let tokens = try ResponseClassifier.decodeTokenResponse(
            status: 200, headers: [:], body: Data(#"{"access_token":"a","expires_in":"60"}"#.utf8),
            requestedScopes: ["openid", "read:items"])
        #expect(tokens.grantedScopes == ["openid", "read:items"])
        #expect(!tokens.scopeWasReturned)
        #expect(tokens.refreshToken == nil)
        #expect(tokens.expiresIn == .seconds(60))
        #expect(tokens.declinedScopes(requested: ["openid", "read:items"]).isEmpty)
    }

    @Test func declinedScopes() {
        // Ordering and duplicates do not matter; offline_access is satisfied by a refresh token.
        #expect(
            TokenResponse.declinedScopes(
                requested: ["openid", "offline_access", "read:items", "read:items"], granted: ["read:items", "openid"],
                refreshTokenReturned: true
            ).isEmpty)
        #expect(
            TokenResponse.declinedScopes(
                requested: ["openid", "offline_access"], granted: ["openid"], refreshTokenReturned: false)
                == ["offline_access"])
        #expect(
            TokenResponse.declinedScopes(
                requested: ["write:items", "openid", "email"], granted: ["openid"], refreshTokenReturned: true)
                == ["write:items", "email"])
    }

    static let canary = "CANARY0123456789abcdefghijklmnopqrstuvwxyz"

    /// Bodies that are not the expected JSON become `unexpectedResponse`, never a crash, and
    /// a 2xx body (which may hold tokens) is never quoted.
    @Test(arguments: [
        "", "null", "[]", "\"x\"", "42", "{", "{\"access_token\":null}", "{\"access_token\":\"\"}",
        "{\"access_token\":42}", "{\"refresh_token\":\"\(canary)\"}", "{\"access_token\":\"a\",\"refresh_token\":7}",
        "<html>\(canary)</html>", String(repeating: "[", count: 10_000), "{\"access_token\":\"\(canary)\",\"id_token\":[]}",
    ])
    func malformedTokenAnswer(body: String) {
        do {
            _ = try ResponseClassifier.decodeTokenResponse(status: 200, headers: [:], body: Data(body.utf8))
            Issue.record("accepted \(body.prefix(40))")
        } catch {
            #expect(error.code == .unexpectedResponse)
            #expect(!error.description.contains("CANARY"))
            #expect(!error.description.contains(Self.canary))
        }
    }

    @Test func errorTextIsSanitized() {
        let description = "Bad\u{1}token \(Self.canary)\n" + String(repeating: "word ", count: 60)
        let body = try! JSONSerialization.data(withJSONObject: ["error": "invalid_request\u{7}", "error_description": description])
        let responseClass = ResponseClassifier.classify(status: 400, headers: [:], body: body, endpoint: .refresh, now: Self.now)
        let error = responseClass.error!
        #expect(error.oauthError == "invalid_request")
        let sanitized = error.oauthErrorDescription ?? ""
        #expect(sanitized.count <= TextSanitizer.defaultLimit)
        #expect(sanitized.unicodeScalars.allSatisfy { ($0.value >= 0x20 && $0.value < 0x7F) || $0 == "…" })
        #expect(!sanitized.contains("CANARY") && sanitized.contains("[redacted]"))
        #expect(!error.description.contains("CANARY"))
        // A non-JSON error body is quoted only as a short sanitized excerpt.
        let html = Data(("<html>" + Self.canary + String(repeating: " filler", count: 100) + "</html>").utf8)
        let server = ResponseClassifier.classify(status: 502, headers: [:], body: html, endpoint: .revoke, now: Self.now)
        let text = server.error!.description
        #expect(!text.contains("CANARY") && text.count < 400, "\(text)")
    }

    @Test func secretsNeverPrint() {
        let token = SecretBytes(utf8: Self.canary)
        let request = HTTPRequest(
            method: "POST", url: URL(string: "https://tenant.example/oauth/revoke")!,
            body: FormEncoding.encode([("token", .secret(token))]))
        #expect(!request.description.contains("CANARY"))
        #expect(!"\(token)".contains("CANARY"))
        #expect(FormEncoding.decode(request.body!).first?.1 == Self.canary)
    }

    @Test func formEncoding() {
        let body = FormEncoding.encode([
            ("scope", .text("openid offline_access")), ("t", .secret(SecretBytes(utf8: "a+b/c=d&e é~*"))),
            ("subject_token_type", .text("http://auth0.com/oauth/token-type/apple-authz-code")),
        ])
        #expect(
            String(decoding: body, as: UTF8.self)
                == "scope=openid+offline_access&t=a%2Bb%2Fc%3Dd%26e+%C3%A9%7E*"
                + "&subject_token_type=http%3A%2F%2Fauth0.com%2Foauth%2Ftoken-type%2Fapple-authz-code")
        let decoded = FormEncoding.decode(body)
        #expect(decoded.map(\.0) == ["scope", "t", "subject_token_type"])
        #expect(decoded[1].1 == "a+b/c=d&e é~*")
    }

    @Test func headersAreCaseInsensitive() {
        var headers: HTTPHeaders = ["Retry-After": "5"]
        #expect(headers["retry-after"] == "5" && headers["RETRY-AFTER"] == "5")
        headers["RETRY-after"] = "6"
        #expect(headers.fields.count == 1 && headers["Retry-After"] == "6")
        headers.add(name: "Set-Cookie", value: "a")
        headers.add(name: "set-cookie", value: "b")
        #expect(headers.values(for: "SET-COOKIE") == ["a", "b"])
        headers["set-cookie"] = nil
        #expect(headers["Set-Cookie"] == nil)
    }

    // MARK: - Configuration

    @Test(arguments: [
        ("https://tenant.auth0.com", true), ("https://tenant.auth0.com/", true), ("HTTPS://Tenant.Auth0.com", true),
        ("http://127.0.0.1:8080", true), ("http://127.1.2.3", true), ("http://localhost:9", true), ("http://[::1]:80", true),
        ("http://tenant.auth0.com", false), ("http://10.0.0.1", false), ("http://127.0.0.1.evil.example", false),
        ("http://localhost.evil.example", false), ("http://0.0.0.0", false), ("http://128.0.0.1", false),
        // Security review 2, N3: a trailing dot is a DNS name, not the loopback host.
        ("http://localhost.:9", false), ("http://LOCALHOST.", false), ("http://127.0.0.1.:9", false),
        ("http://[::1].:9", false), ("http://localhost..:9", false),
        ("ftp://tenant.auth0.com", false), ("tenant.auth0.com", false), ("https://", false),
        ("https://user:pw@tenant.auth0.com", false), ("https://tenant.auth0.com/?x=1", false),
    ])
    func configurationValidation(domain: String, accepted: Bool) {
        do {
            let configuration = try AuthorizationServerConfiguration(domain: domain, clientID: "tokenstore-test")
            #expect(accepted, "\(domain) was accepted")
            #expect(configuration.tokenEndpoint.path.hasSuffix("/oauth/token"))
            #expect(configuration.revocationEndpoint.path.hasSuffix("/oauth/revoke"))
            #expect(!configuration.tokenEndpoint.path.contains("//"))
        } catch {
            #expect(!accepted, "\(domain) was refused: \(error)")
            #expect((error as? AuthSessionError)?.code == .insecureConfiguration)
        }
    }

    @Test func codesMatchWithPattern() {
        let error: any Error = AuthSessionError(.rateLimited, "x", retryAfter: .seconds(3))
        switch error {
        case AuthSessionError.interactionRequired: Issue.record("wrong code matched")
        case AuthSessionError.rateLimited: break
        default: Issue.record("code did not match")
        }
        #expect("\(error)".contains("retry after 3s"))
        let storage = AuthSessionError.storage(TokenStoreError(.keyringLocked, "locked"))
        #expect(storage.code == .storage && storage.description.contains("keyringLocked"))
    }

    @Test("a store error wrapped by the session layer (storage) still matches the store's pattern in a catch")
    func storePatternMatchesThroughStorage() {
        func classify(_ error: any Error) -> String {
            do { throw error }
            catch TokenStoreError.keyringLocked { return "locked" }
            catch AuthSessionError.storage { return "storage" }
            catch { return "other" }
        }
        #expect(classify(AuthSessionError.storage(TokenStoreError(.keyringLocked, "locked"))) == "locked")
        #expect(classify(TokenStoreError(.keyringLocked, "locked")) == "locked")
        #expect(classify(AuthSessionError.storage(TokenStoreError(.ioError, "io"))) == "storage")
        #expect(classify(AuthSessionError(.rateLimited, "x")) == "other")
    }

    @Test("every code has a pattern that matches only that code; raw values are stable; equality is by code")
    func everyCodeHasAPattern() {
        let patterns: [(AuthSessionError, String)] = [
            (.interactionRequired, "interactionRequired"), (.serverDeclinedScopes, "serverDeclinedScopes"),
            (.notConnectedToInternet, "notConnectedToInternet"), (.timedOut, "timedOut"), (.rateLimited, "rateLimited"),
            (.serverError, "serverError"), (.invalidClient, "invalidClient"), (.invalidRequest, "invalidRequest"),
            (.unsupportedTokenType, "unsupportedTokenType"), (.invalidGrant, "invalidGrant"),
            (.unexpectedResponse, "unexpectedResponse"), (.tlsFailure, "tlsFailure"), (.cancelled, "cancelled"),
            (.insecureConfiguration, "insecureConfiguration"), (.storage, "storage"),
            (.authorizationFailed, "authorizationFailed"), (.stateMismatch, "stateMismatch"),
            (.idTokenInvalid, "idTokenInvalid"), (.loopbackUnavailable, "loopbackUnavailable"),
            (.browserUnavailable, "browserUnavailable"), (.minimumTTLTooLarge, "minimumTTLTooLarge"),
            (.userChanged, "userChanged"),
            (.notRevocable, "notRevocable"), (.authorizationMisconfigured, "authorizationMisconfigured"),
            (.issuerMismatch, "issuerMismatch"), (.dpopKeyLost, "dpopKeyLost"),
            (.unsupportedByServer, "unsupportedByServer"), (.stepUpRequired, "stepUpRequired"),
            (.accessTokenRejected, "accessTokenRejected"),
        ]
        #expect(AuthSessionError.Code.allCases.map(\.rawValue) == patterns.map(\.1))
        for (pattern, rawValue) in patterns {
            #expect(pattern.code.rawValue == rawValue && "\(pattern.code)" == rawValue)
            #expect(pattern.description.hasPrefix("AuthSessionError.\(rawValue): "))
            for (other, otherRawValue) in patterns {
                let thrown: any Error = AuthSessionError(other.code, "m", httpStatus: 400, oauthError: "e")
                #expect((pattern ~= thrown) == (rawValue == otherRawValue), "\(rawValue) vs \(otherRawValue)")
            }
        }
        let detailed = AuthSessionError(.invalidGrant, "rejected", httpStatus: 400, oauthError: "invalid_grant")
        #expect(detailed == .invalidGrant && detailed != .invalidRequest)
        #expect(throws: AuthSessionError.invalidGrant) { throw detailed }
    }
}
