import AuthSession
import Foundation
import TokenStore

/// Sign-in, logout and silent renewal end to end against the local authorization server
/// (Tests/AuthServer/server.py on loopback): HTTP, the server's work, and the durable store
/// transactions, as an app sees them.
struct SessionBench {
    let serverURL: URL
    let directory: String
    let iterations: Int
    let warmup = 5

    /// Asks the test server for a single-use Apple authorization code for `sub`.
    func appleCode(_ transport: CurlTransport, sub: String) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["sub": sub])
        let request = HTTPRequest(
            method: "POST", url: serverURL.appendingPathComponent("__test/apple/code"),
            headers: ["Content-Type": "application/json"], body: body, timeout: .seconds(10))
        let response = try await transport.send(request)
        guard response.status == 200,
            let json = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let code = json["code"] as? String
        else {
            throw BenchFailure("the test server gave no Apple code (HTTP \(response.status))")
        }
        return code
    }

    func run() async throws -> SessionFigures {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try TokenStore(path: directory + "/tokens.sqlite", appID: "dev.tokenstore.bench.session")
        defer { store.close() }
        let configuration = try AuthorizationServerConfiguration(domain: serverURL, clientID: "tokenstore-test")
        let session = TokenSession(store: store, configuration: configuration)
        let control = CurlTransport()
        var figures = SessionFigures()

        // A resident account keeps the store from emptying: the logout of the store's last
        // account also rotates the data key (crypto-erase), measured on its own below.
        let residentCode = try await appleCode(control, sub: "apple-resident")
        try await session.signInWithApple(
            authorizationCode: SecretBytes(utf8: residentCode), appleUserID: "apple-resident", account: "resident")

        // Sign in, then log out (revoke at the server, delete locally, record `revoked`).
        for iteration in 0..<(warmup + iterations) {
            let account = AccountID("account-\(iteration)")
            let code = try await appleCode(control, sub: "apple-\(iteration)")
            var start = monotonicNanos()
            try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-\(iteration)", account: account,
                scopes: ["openid", "read:items"])
            let signIn = monotonicNanos() - start
            start = monotonicNanos()
            let outcome = try await session.logout(account: account)
            let logout = monotonicNanos() - start
            guard outcome == .revoked else { throw BenchFailure("logout ended \(outcome), not revoked") }
            if iteration >= warmup {
                figures.signIn.add(signIn)
                figures.logout.add(logout)
            }
        }

        // The revocation request alone (POST /oauth/revoke on a fresh refresh token), to tell the
        // network and server share of a logout from the store's.
        for iteration in 0..<(warmup + iterations) {
            let account = AccountID("revoke-\(iteration)")
            let code = try await appleCode(control, sub: "apple-revoke-\(iteration)")
            try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-revoke-\(iteration)", account: account)
            guard let token = try store.refreshToken(account: account) else { throw BenchFailure("no refresh token") }
            let start = monotonicNanos()
            let result = await session.client.revoke(token)
            let elapsed = monotonicNanos() - start
            guard case .revoked = result else { throw BenchFailure("revoke answered \(result.outcome)") }
            if iteration >= warmup { figures.revokeHTTP.add(elapsed) }
            _ = try await session.logout(account: account)
        }

        // The coordinator's three steps, called one by one through the store's public API, to
        // show where a logout's time goes: (1) the outbox transaction, (2) the revocation,
        // (3) the completion transaction and the WAL checkpoint.
        for iteration in 0..<(warmup + iterations) {
            let account = AccountID("steps-\(iteration)")
            let code = try await appleCode(control, sub: "apple-steps-\(iteration)")
            try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-steps-\(iteration)", account: account)
            var start = monotonicNanos()
            let preparation = try store.ledger.beginLogout(account: account)
            let begin = monotonicNanos() - start
            guard case .queued(let entries) = preparation, let entry = entries.first else {
                throw BenchFailure("beginLogout queued nothing")
            }
            start = monotonicNanos()
            let result = await session.client.revoke(entry.refreshToken)
            let revoke = monotonicNanos() - start
            guard case .revoked = result else { throw BenchFailure("revoke answered \(result.outcome)") }
            start = monotonicNanos()
            _ = try store.ledger.recordRevocationAttempt(entry, result: .revoked)
            let record = monotonicNanos() - start
            if iteration >= warmup {
                figures.stepBegin.add(begin)
                figures.stepRevoke.add(revoke)
                figures.stepRecord.add(record)
            }
        }

        // Silent renewal: a minimum TTL longer than the access token's lifetime (3,600 s)
        // forces a refresh (with rotation) every time.
        let account = AccountID("renewing")
        let code = try await appleCode(control, sub: "apple-renewing")
        try await session.signInWithApple(
            authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-renewing", account: account)
        for iteration in 0..<(warmup + iterations) {
            let start = monotonicNanos()
            let token = try await session.accessToken(for: account, forceRefresh: true)
            let elapsed = monotonicNanos() - start
            guard token.source == .network else { throw BenchFailure("renewal came from \(token.source)") }
            if iteration >= warmup { figures.renewal.add(elapsed) }
        }
        // The same call when the cached access token qualifies (no network).
        for iteration in 0..<(warmup * 10 + iterations * 10) {
            let start = monotonicNanos()
            let token = try await session.accessToken(for: account, minimumTTL: .seconds(60))
            let elapsed = monotonicNanos() - start
            guard token.source == .cache else { throw BenchFailure("cached token came from \(token.source)") }
            if iteration >= warmup * 10 { figures.cacheHit.add(elapsed) }
        }
        _ = try await session.logout(account: account)
        _ = try await session.logout(account: "resident")

        // Logout of the last account of a store: the same, plus the key rotation that
        // crypto-erases what secure delete may have missed (a new key in the keyring).
        for iteration in 0..<(warmup + max(5, iterations / 4)) {
            let account = AccountID("last-\(iteration)")
            let code = try await appleCode(control, sub: "apple-last-\(iteration)")
            try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-last-\(iteration)", account: account)
            let start = monotonicNanos()
            let outcome = try await session.logout(account: account)
            let elapsed = monotonicNanos() - start
            guard outcome == .revoked else { throw BenchFailure("logout ended \(outcome), not revoked") }
            if iteration >= warmup { figures.lastLogout.add(elapsed) }
        }
        return figures
    }
}
