import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

/// `AuthorizationServerClient` over the real `CurlTransport` (libcurl) against the real local
/// authorization server (Tests/AuthServer/server.py), with its fault injection.
/// Each test starts its own server, so tests may run in parallel.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct AuthorizationServerClientTests {
    /// The total-time budget is wide on purpose: on a loaded machine it must not decide how many
    /// requests a case sees (the budget has tests of its own).
    static let fastPolicy = RetryPolicy(
        maximumAttempts: 2, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50),
        maximumRetryAfter: .seconds(2), maximumTotalTime: .seconds(30))

    static func client(
        _ server: AuthorizationServer, policy: RetryPolicy = fastPolicy, timeout: Duration = .seconds(5),
        clientID: String = AuthorizationServer.publicClientID, secret: String? = nil, logger: TokenStoreLogger = .disabled
    ) throws -> AuthorizationServerClient {
        let configuration = try AuthorizationServerConfiguration(
            domain: server.baseURL, clientID: clientID, clientSecret: secret.map { SecretBytes(utf8: $0) },
            requestTimeout: timeout)
        return AuthorizationServerClient(
            configuration: configuration, transport: CurlTransport(), retryPolicy: policy, logger: logger)
    }

    static func seconds(_ duration: Duration) -> Double {
        let (s, atto) = duration.components
        return Double(s) + Double(atto) / 1e18
    }

    static func string(_ secret: SecretBytes?) -> String { secret?.stringValue() ?? "" }

    /// Collects log records (to check that no token ever reaches a log line).
    final class LogSink: @unchecked Sendable {  // `records` is only touched under `lock`
        private let lock = NSLock()
        private var records: [TokenStoreLogger.Record] = []
        var logger: TokenStoreLogger { TokenStoreLogger(label: "test", level: .trace) { record in self.append(record) } }
        private func append(_ record: TokenStoreLogger.Record) { lock.withLock { records.append(record) } }
        var lines: [String] { lock.withLock { records.map(\.description) } }
    }

    /// Starts a server for `body` and stops it afterwards (the suite runs off the cooperative pool).
    static func withServer(_ body: (AuthorizationServer) async throws -> Void) async throws {
        let server = try await offPool { try AuthorizationServer(logRequests: false) }
        do {
            try await body(server)
        } catch {
            _ = await offPool { server.stop() }
            throw error
        }
        await offPool { server.stop() }
    }

    // MARK: - Happy path

    @Test func exchangeRefreshRevoke() async throws {
        try await Self.withServer { server in
            let sink = LogSink()
            let client = try Self.client(server, logger: sink.logger)
            let scopes = ["openid", "offline_access", "read:items"]

            let code = try server.appleAuthorizationCode(for: "apple-user-001")
            let signIn = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: scopes)
            let firstRefresh = try #require(signIn.refreshToken)
            #expect(signIn.tokenType == "Bearer")
            #expect(signIn.idToken != nil)
            #expect(signIn.expiresIn == .seconds(3600))
            #expect(Set(signIn.grantedScopes) == Set(scopes))
            #expect(signIn.declinedScopes(requested: scopes).isEmpty)
            #expect(try server.introspect(Self.string(signIn.accessToken)).active)
            #expect(try server.introspect(Self.string(firstRefresh)).active)

            // The code is single use.
            await #expect(throws: AuthSessionError.invalidGrant) {
                _ = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: scopes)
            }

            // Refresh rotates: the old refresh token is retired.
            let renewed = try await client.refresh(firstRefresh, scopes: ["openid", "offline_access"])
            let secondRefresh = try #require(renewed.refreshToken)
            #expect(secondRefresh != firstRefresh)
            #expect(try server.introspect(Self.string(firstRefresh)).reason == "rotated")
            #expect(try server.introspect(Self.string(secondRefresh)).active)

            // Revoke: 200, and the server says the token is no longer active.
            let result = await client.revoke(secondRefresh)
            guard case .revoked = result else {
                Issue.record("revoke: \(result)")
                return
            }
            let after = try server.introspect(Self.string(secondRefresh))
            #expect(!after.active && after.familyRevoked)

            // A refresh with the revoked token: invalid_grant ⇒ interactionRequired, OAuth error kept.
            do {
                _ = try await client.refresh(secondRefresh, scopes: ["openid"])
                Issue.record("refresh with a revoked token succeeded")
            } catch let error as AuthSessionError {
                #expect(error.code == .interactionRequired)
                #expect(error.oauthError == "invalid_grant")
                #expect(error.httpStatus == 400)
            }

            let stats = try server.stats()
            #expect(stats.exchangeGrants == 1 && stats.refreshGrants == 1 && stats.revocations == 1)

            // No token or code in any log line.
            let secrets = [code, Self.string(signIn.accessToken), Self.string(firstRefresh), Self.string(secondRefresh),
                           Self.string(renewed.accessToken), Self.string(signIn.idToken)]
            let lines = sink.lines
            #expect(!lines.isEmpty)
            for line in lines {
                for secret in secrets where !secret.isEmpty {
                    #expect(!line.contains(secret), "a token reached the log: \(line.prefix(60))…")
                }
            }
            #expect(lines.contains { $0.contains("revoke.outcome=revoked") })
        }
    }

    @Test func declinedScopesAreComputed() async throws {
        try await Self.withServer { server in
            let client = try Self.client(server)
            let code = try server.appleAuthorizationCode(for: "apple-user-002")
            let requested = ["openid", "offline_access", "admin:everything", "read:items"]
            let tokens = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: requested)
            #expect(tokens.scopeWasReturned)
            #expect(!tokens.grantedScopes.contains("admin:everything"))
            #expect(tokens.declinedScopes(requested: requested) == ["admin:everything"])
        }
    }

    @Test func confidentialClientSendsItsSecret() async throws {
        try await Self.withServer { server in
            let good = try Self.client(
                server, clientID: AuthorizationServer.confidentialClientID,
                secret: AuthorizationServer.confidentialClientSecret)
            let code = try server.appleAuthorizationCode(for: "apple-user-003")
            let tokens = try await good.exchangeAppleAuthorizationCode(
                SecretBytes(utf8: code), scopes: ["openid", "offline_access"])
            let refresh = try #require(tokens.refreshToken)

            let wrong = try Self.client(server, clientID: AuthorizationServer.confidentialClientID, secret: "not-the-secret")
            let refused = await wrong.revoke(refresh)
            guard case .failedPermanently(let error) = refused else {
                Issue.record("wrong secret: \(refused)")
                return
            }
            #expect(error.code == .invalidClient && error.httpStatus == 401)
            #expect(try server.introspect(Self.string(refresh)).active)

            guard case .revoked = await good.revoke(refresh) else {
                Issue.record("revoke with the right secret failed")
                return
            }
            #expect(try !server.introspect(Self.string(refresh)).active)
        }
    }

    // MARK: - Retry behaviour

    @Test func rateLimitedThenSuccessWaitsTheAskedTime() async throws {
        try await Self.withServer { server in
            let log = SleepLog()
            let policy = log.recording(RetryPolicy(
                maximumAttempts: 3, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50),
                maximumRetryAfter: .seconds(5), maximumTotalTime: .seconds(30)))
            let client = try Self.client(server, policy: policy)
            let tokens = try server.signIn(appleUserID: "apple-user-004")
            let refresh = try #require(tokens.refreshToken)
            try server.inject(.status(429, path: "/oauth/revoke", retryAfter: "2", body: #"{"error":"too_many_requests"}"#))

            let clock = ContinuousClock()
            let start = clock.now
            let result = await client.revoke(SecretBytes(utf8: refresh))
            let elapsed = clock.now - start
            guard case .revoked = result else {
                Issue.record("429 then 200: \(result)")
                return
            }
            #expect(elapsed >= .seconds(2), "waited only \(elapsed)")
            #expect(log.sleeps == [.seconds(2)], "the policy waited \(log.sleeps), not the asked 2 s once")
            #expect(try server.stats().revokeRequests == 2)
            #expect(try !server.introspect(refresh).active)
        }
    }

    @Test func refreshRetriesA503ThenSucceeds() async throws {
        try await Self.withServer { server in
            let client = try Self.client(server)
            let tokens = try server.signIn(appleUserID: "apple-user-005")
            try server.inject(.status(503, path: "/oauth/token", body: "Service Unavailable"))
            let renewed = try await client.refresh(SecretBytes(utf8: try #require(tokens.refreshToken)), scopes: ["openid"])
            #expect(renewed.refreshToken != nil)
            let stats = try server.stats()
            #expect(stats.refreshGrants == 1)
            #expect(stats.tokenRequests == 2 + 1)  // the sign-in, the 503, the retry
        }
    }

    @Test func redirectOnRefreshIsNotFollowed() async throws {
        try await Self.withServer { server in
            let client = try Self.client(server)
            let tokens = try server.signIn(appleUserID: "apple-user-006")
            let refresh = try #require(tokens.refreshToken)
            // The redirect points at the real endpoint: following it would rotate the token.
            try server.inject(.redirect(to: server.tokenURL.absoluteString, status: 307, path: "/oauth/token"))
            await #expect(throws: AuthSessionError.invalidRequest) {
                _ = try await client.refresh(SecretBytes(utf8: refresh), scopes: ["openid"])
            }
            #expect(try server.introspect(refresh).active)
            let stats = try server.stats()
            #expect(stats.refreshGrants == 0)
            #expect(stats.tokenRequests == 2, "the redirect was followed")  // the sign-in and the redirected request
        }
    }

    @Test func insecureDomainIsRefusedBeforeAnyRequest() async throws {
        try await Self.withServer { server in
            for domain in ["http://tenant.auth0.com", "http://192.168.1.10:\(server.port)", "http://example.com:\(server.port)"] {
                #expect {
                    _ = try AuthorizationServerConfiguration(domain: domain, clientID: AuthorizationServer.publicClientID)
                } throws: { error in
                    (error as? AuthSessionError)?.code == .insecureConfiguration
                }
            }
            let stats = try server.stats()
            #expect(stats.tokenRequests == 0 && stats.revokeRequests == 0)
            // Loopback over http is accepted.
            #expect(throws: Never.self) {
                _ = try AuthorizationServerConfiguration(domain: server.baseURL, clientID: AuthorizationServer.publicClientID)
            }
        }
    }

    @Test func serverDownIsNotConnectedWithinThePolicyBound() async throws {
        try await Self.withServer { server in
            let tokens = try server.signIn(appleUserID: "apple-user-007")
            let log = SleepLog()
            let policy = log.recording(RetryPolicy(
                maximumAttempts: 3, baseDelay: .milliseconds(50), maximumDelay: .milliseconds(200),
                maximumRetryAfter: .seconds(1), maximumTotalTime: .seconds(2)))
            let client = try Self.client(server, policy: policy, timeout: .seconds(2))
            await offPool { server.stop() }  // nothing listens on the port any more

            let clock = ContinuousClock()
            var start = clock.now
            do {
                _ = try await client.refresh(SecretBytes(utf8: try #require(tokens.refreshToken)), scopes: ["openid"])
                Issue.record("refresh succeeded with the server down")
            } catch let error as AuthSessionError {
                #expect(error.code == .notConnectedToInternet, "\(error)")
                guard case .transport(let failure)? = error.cause else {
                    Issue.record("no transport cause")
                    return
                }
                #expect(failure.kind == .notConnected && failure.underlying != nil)
            }
            // The policy's bound, as the policy applied it: at most maximumAttempts attempts
            // (so at most maximumAttempts - 1 waits), each a backoff within its ceiling, all
            // within the total budget. (Not wall time: a loaded machine is slower, not wrong.)
            func expectWithinPolicy(_ what: String) {
                let sleeps = log.sleeps
                #expect(sleeps.count <= policy.maximumAttempts - 1, "\(what): \(sleeps.count) waits")
                for (n, sleep) in sleeps.enumerated() {
                    #expect(sleep <= policy.backoffCeiling(retry: n), "\(what): wait \(n) was \(sleep)")
                }
                #expect(log.total <= policy.maximumTotalTime, "\(what): waited \(log.total) in all")
            }
            expectWithinPolicy("refresh")
            // A hang detector only, far above anything the policy allows.
            #expect(clock.now - start < .seconds(60))
            let waitsBefore = log.sleeps.count

            start = clock.now
            let result = await client.revoke(SecretBytes(utf8: try #require(tokens.refreshToken)))
            guard case .retryLater(let error) = result else {
                Issue.record("revoke with the server down: \(result)")
                return
            }
            #expect(error.code == .notConnectedToInternet)
            #expect(log.sleeps.count - waitsBefore <= policy.maximumAttempts - 1, "revoke: \(log.sleeps)")
            #expect(log.sleeps.dropFirst(waitsBefore).reduce(.zero, +) <= policy.maximumTotalTime)
            #expect(clock.now - start < .seconds(60))
        }
    }

    @Test func cancellationStopsTheCallPromptly() async throws {
        try await Self.withServer { server in
            let client = try Self.client(server, timeout: .seconds(20))
            let tokens = try server.signIn(appleUserID: "apple-user-008")
            try server.inject(.delay(20, path: "/oauth/revoke"))
            let refresh = SecretBytes(utf8: try #require(tokens.refreshToken))
            let clock = ContinuousClock()
            let start = clock.now
            let task = Task { await client.revoke(refresh) }
            try await Task.sleep(for: .milliseconds(300))
            task.cancel()
            let result = await task.value
            // Not interrupted, the call would end after the server's 20 s with 200 (revoked).
            #expect(clock.now - start < .seconds(20), "cancellation did not interrupt the 20 s wait")
            guard case .retryLater(let error) = result else {
                Issue.record("cancelled revoke: \(result)")
                return
            }
            #expect(error.code == .cancelled)
        }
    }

    // MARK: - revocation_responses, end to end

    struct EndToEndCase {
        enum TokenChoice { case real, unknown }
        var name: String
        var faults: [AuthorizationServer.Fault] = []
        /// Faults that hold a time (a Retry-After date, a reset epoch), built when the case runs,
        /// not when the list is made: under ThreadSanitizer the list takes minutes to get through.
        var faultsAt: ((Date) -> [AuthorizationServer.Fault])?
        var token: TokenChoice = .real
        var timeout: Duration = .seconds(5)
        var clientID = AuthorizationServer.publicClientID
        var secret: String?
        var expected: ClassificationTests.Expected
        /// Requests the server must have seen at /oauth/revoke.
        var requests: Int
        var minimumElapsed: Duration = .zero
        /// Talk TLS to the (plain HTTP) server: the handshake fails.
        var useTLS = false
        /// Whether the real token is still active at the server afterwards (nil: do not check).
        var activeAfter: Bool?
    }

    static func endToEndCases(server: AuthorizationServer) -> [EndToEndCase] {
        typealias Fault = AuthorizationServer.Fault
        let revoke = "/oauth/revoke"
        let cap = fastPolicy.maximumRetryAfter
        let json = { (error: String) in #"{"error":"\#(error)","error_description":"injected"}"# }
        func date(_ format: String, _ when: Date) -> String {
            RetryAfterTests.posixFormatter(format).string(from: when)
        }
        func asctime(_ when: Date) -> String {
            let text = date("EEE MMM d HH:mm:ss yyyy", when)
            let parts = text.split(separator: " ")
            guard parts[2].count == 1 else { return text }
            return "\(parts[0]) \(parts[1])  \(parts[2]) \(parts[3]) \(parts[4])"
        }
        func limited(_ retryAfter: String?, count: Int = 2) -> [Fault] {
            [Fault.status(429, path: revoke, count: count, retryAfter: retryAfter, body: json("too_many_requests"))]
        }
        return [
            EndToEndCase(name: "200 real token", expected: .revoked, requests: 1, activeAfter: false),
            EndToEndCase(name: "200 unknown token", token: .unknown, expected: .revoked, requests: 1, activeAfter: true),
            EndToEndCase(
                name: "200 non-JSON body", faults: [Fault.status(200, path: revoke, body: "revoked, thanks")],
                expected: .revoked, requests: 1),
            EndToEndCase(
                name: "200 after the real revoke, body lost",
                faults: [Fault(path: revoke, status: 200, body: "<html>ok</html>", phase: .after)],
                expected: .revoked, requests: 1, activeAfter: false),
            EndToEndCase(
                name: "400 invalid_request", faults: [Fault.status(400, path: revoke, body: json("invalid_request"))],
                expected: .permanent(.invalidRequest), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "400 unsupported_token_type",
                faults: [Fault.status(400, path: revoke, body: json("unsupported_token_type"))],
                expected: .permanent(.unsupportedTokenType), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "401 invalid_client (injected)",
                faults: [Fault.status(401, path: revoke, body: json("invalid_client"))],
                expected: .permanent(.invalidClient), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "401 invalid_client (unknown client id, real)", clientID: "no-such-client",
                expected: .permanent(.invalidClient), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "403 HTML", faults: [Fault.status(403, path: revoke, body: "<h1>Forbidden</h1>")],
                expected: .permanent(.unexpectedResponse), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "400 non-JSON", faults: [Fault.status(400, path: revoke, body: "Bad Request")],
                expected: .permanent(.unexpectedResponse), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "408", faults: [Fault.status(408, path: revoke, count: 2)],
                expected: .retry(.timedOut, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "429 without Retry-After", faults: limited(nil),
                expected: .retry(.rateLimited, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "429 Retry-After 1 (honoured)", faults: limited("1"),
                expected: .retry(.rateLimited, retryAfter: .seconds(1)), requests: 2, minimumElapsed: .seconds(1),
                activeAfter: true),
            EndToEndCase(
                name: "429 Retry-After 1 then 200", faults: limited("1", count: 1),
                expected: .revoked, requests: 2, minimumElapsed: .seconds(1), activeAfter: false),
            EndToEndCase(
                name: "429 Retry-After 30 (over the cap: no wait)", faults: limited("30"),
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "429 IMF-fixdate", 
                faultsAt: { now in limited(date("EEE, dd MMM yyyy HH:mm:ss 'GMT'", now + 30)) },
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "429 RFC 850 date", 
                faultsAt: { now in limited(date("EEEE, dd-MMM-yy HH:mm:ss 'GMT'", now + 30)) },
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "429 asctime date", faultsAt: { now in limited(asctime(now + 30)) },
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "429 past date", faults: limited("Sun, 06 Nov 1994 08:49:37 GMT"),
                expected: .retry(.rateLimited, retryAfter: .zero), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "429 garbage Retry-After", faults: limited("whenever"),
                expected: .retry(.rateLimited, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "429 huge Retry-After", faults: limited("999999999999"),
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "429 X-RateLimit-Reset",
                faultsAt: { now in
                    [
                        Fault(
                            path: revoke, count: 2, status: 429,
                            headers: ["X-RateLimit-Reset": "\(Int(now.timeIntervalSince1970) + 60)"])
                    ]
                },
                expected: .retry(.rateLimited, retryAfter: cap), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "500", faults: [Fault.status(500, path: revoke, count: 2, body: "Internal Server Error")],
                expected: .retry(.serverError, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "502 HTML", faults: [Fault.status(502, path: revoke, count: 2, body: "<html>Bad Gateway</html>")],
                expected: .retry(.serverError, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "503", faults: [Fault.status(503, path: revoke, count: 2)],
                expected: .retry(.serverError, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "503 once then 200", faults: [Fault.status(503, path: revoke, count: 1)],
                expected: .revoked, requests: 2, activeAfter: false),
            EndToEndCase(
                name: "connection dropped (EOF)", faults: [Fault.drop(.eof, path: revoke, count: 2)],
                expected: .retry(.notConnectedToInternet, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "connection reset (RST)", faults: [Fault.drop(.reset, path: revoke, count: 2)],
                expected: .retry(.notConnectedToInternet, retryAfter: nil), requests: 2, activeAfter: true),
            EndToEndCase(
                name: "slow body, short timeout", faults: [Fault(path: revoke, count: 2, slowBody: 3)],
                timeout: .milliseconds(700), expected: .retry(.timedOut, retryAfter: nil), requests: 2),
            EndToEndCase(
                name: "slow headers, short timeout", faults: [Fault(path: revoke, count: 2, status: 200, delay: 2)],
                timeout: .milliseconds(700), expected: .retry(.timedOut, retryAfter: nil), requests: 2),
            EndToEndCase(
                name: "TLS handshake failure", expected: .retry(.tlsFailure, retryAfter: nil), requests: 0,
                useTLS: true, activeAfter: true),
            EndToEndCase(
                name: "301 redirect to the real endpoint",
                faults: [Fault.redirect(to: server.revokeURL.absoluteString, status: 301, path: revoke)],
                expected: .permanent(.invalidRequest), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "302 redirect", faults: [Fault.redirect(to: server.revokeURL.absoluteString, status: 302, path: revoke)],
                expected: .permanent(.invalidRequest), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "307 redirect", faults: [Fault.redirect(to: server.revokeURL.absoluteString, status: 307, path: revoke)],
                expected: .permanent(.invalidRequest), requests: 1, activeAfter: true),
            EndToEndCase(
                name: "308 redirect off-host", faults: [Fault.redirect(to: "http://127.0.0.2:9/x", status: 308, path: revoke)],
                expected: .permanent(.invalidRequest), requests: 1, activeAfter: true),
        ]
    }

    @Test func revocationResponses() async throws {
        try await Self.withServer { server in
            let cases = Self.endToEndCases(server: server)
            var misclassified: [String] = []
            let clock = ContinuousClock()
            for item in cases {
                try server.reset()
                let tokens = try server.signIn(appleUserID: "apple-user-e2e")
                let realToken = try #require(tokens.refreshToken)
                let presented = item.token == .real ? realToken : "unknown-" + UUID().uuidString
                if !item.faults.isEmpty { try server.inject(contentsOf: item.faults) }
                if let faultsAt = item.faultsAt { try server.inject(contentsOf: faultsAt(Date())) }
                var client = try Self.client(server, timeout: item.timeout, clientID: item.clientID, secret: item.secret)
            if item.useTLS {
                let configuration = try AuthorizationServerConfiguration(
                    domain: "https://127.0.0.1:\(server.port)", clientID: item.clientID, requestTimeout: item.timeout)
                client = AuthorizationServerClient(
                    configuration: configuration, transport: CurlTransport(), retryPolicy: Self.fastPolicy)
            }

                let start = clock.now
                let result = await client.revoke(SecretBytes(utf8: presented))
                let elapsed = clock.now - start
                let observed = ClassificationTests.observed(result)
                let requests = try server.stats().revokeRequests

                var problems: [String] = []
                if observed != item.expected { problems.append("got \(observed), expected \(item.expected)") }
                if requests != item.requests { problems.append("\(requests) requests, expected \(item.requests)") }
                if elapsed < item.minimumElapsed { problems.append("returned after \(elapsed) < \(item.minimumElapsed)") }
                if let activeAfter = item.activeAfter, try server.introspect(realToken).active != activeAfter {
                    problems.append("token active=\(!activeAfter), expected \(activeAfter)")
                }
                if let text = result.error?.description, text.contains(realToken) || text.contains(presented) {
                    problems.append("the token is in the error text")
                }
                if !problems.isEmpty { misclassified.append("\(item.name): " + problems.joined(separator: "; ")) }
            }
            print("METRIC revocation_responses cases=\(cases.count) misclassified=\(misclassified.count)")
            #expect(cases.count >= 25)
            #expect(misclassified.isEmpty, "\(misclassified.joined(separator: "\n"))")
        }
    }
}

extension AuthorizationServer {
    /// Queues a list of faults in order.
    func inject(contentsOf faults: [Fault]) throws {
        for fault in faults { try inject(fault) }
    }
}
