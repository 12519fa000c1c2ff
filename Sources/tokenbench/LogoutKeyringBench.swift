import AuthSession
import Foundation
import TokenStore

/// `tokenbench --server URL --logout-keyring-sizes 100,1000,3000`: a logout end to end (the
/// revocation against the local server, the store's transactions, the key provider's epoch
/// write) with the keyring holding N other items, since gnome-keyring rewrites its whole file
/// on every write. One `METRIC bench_logout` line per size, with the revocation alone beside it.
/// `revokeDelayMilliseconds`: the local server holds each revocation that long (a fault of its
/// control API), standing in for the round trip to a real authorization server: a logout makes
/// its keyring write beside the revocation, so it should cost the slower of the two.
struct LogoutKeyringBench {
    let serverURL: URL
    let directory: String
    let sizes: [Int]
    let iterations: Int
    var revokeDelayMilliseconds = 0

    func run() async throws {
        let items = try LibsecretItems()
        defer { try? items.clearAll() }
        let filler = [UInt8](repeating: 0x61, count: Workload.tokenBytes)
        var filled = 0
        let control = CurlTransport()
        let helper = SessionBench(serverURL: serverURL, directory: directory, iterations: iterations)
        for (round, size) in sizes.sorted().enumerated() {
            while filled < size {
                try items.store(index: filled, value: filler)
                filled += 1
            }
            let path = "\(directory)/logout-\(size)/tokens.sqlite"
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let store = try TokenStore(path: path, appID: "dev.tokenstore.bench.logout")
            defer { store.close() }
            let session = TokenSession(store: store, configuration: try AuthorizationServerConfiguration(domain: serverURL, clientID: "tokenstore-test"))
            // A resident account: the logouts measured are not the store's last (no crypto-erase).
            let resident = try await helper.appleCode(control, sub: "apple-resident-\(round)")
            try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: resident), appleUserID: "apple-resident-\(round)", account: "resident")
            var logout = Samples()
            var revoke = Samples()
            for iteration in 0..<(helper.warmup + iterations) {
                let account = AccountID("account-\(round)-\(iteration)")
                let code = try await helper.appleCode(control, sub: "apple-\(round)-\(iteration)")
                try await session.signInWithApple(
                    authorizationCode: SecretBytes(utf8: code), appleUserID: "apple-\(round)-\(iteration)", account: account)
                // The revocation request alone, on a fresh token of the same server.
                let probeCode = try await helper.appleCode(control, sub: "apple-probe-\(round)-\(iteration)")
                try await session.signInWithApple(
                    authorizationCode: SecretBytes(utf8: probeCode), appleUserID: "apple-probe-\(round)-\(iteration)", account: "probe")
                guard let token = try store.refreshToken(account: "probe") else { throw BenchFailure("no refresh token") }
                try await holdNextRevocations(control, count: 1)
                var start = monotonicNanos()
                guard case .revoked = await session.client.revoke(token) else { throw BenchFailure("the revocation failed") }
                let revoked = monotonicNanos() - start
                _ = try store.ledger.clearLocally(account: "probe")
                try await holdNextRevocations(control, count: 1)
                start = monotonicNanos()
                guard try await session.logout(account: account) == .revoked else { throw BenchFailure("the logout did not revoke") }
                let elapsed = monotonicNanos() - start
                if iteration >= helper.warmup {
                    logout.add(elapsed)
                    revoke.add(revoked)
                }
            }
            let ms = { (nanos: Double) in String(format: "%.1f", nanos / 1e6) }
            print(
                "METRIC bench_logout keyring_items=\(size) logout_p50_ms=\(ms(logout.p50)) logout_p99_ms=\(ms(logout.p99)) "
                    + "revoke_p50_ms=\(ms(revoke.p50)) store_share_p50_ms=\(ms(logout.p50 - revoke.p50)) "
                    + "revoke_delay_ms=\(revokeDelayMilliseconds) iterations=\(iterations)")
        }
    }

    /// Asks the local server to hold its next `count` revocations ``revokeDelayMilliseconds``.
    private func holdNextRevocations(_ control: CurlTransport, count: Int) async throws {
        guard revokeDelayMilliseconds > 0 else { return }
        let fault: [String: Any] = ["path": "/oauth/revoke", "count": count, "delay": Double(revokeDelayMilliseconds) / 1000]
        let request = HTTPRequest(
            method: "POST", url: serverURL.appendingPathComponent("__test/faults"),
            headers: ["Content-Type": "application/json"], body: try JSONSerialization.data(withJSONObject: fault), timeout: .seconds(10))
        let response = try await control.send(request)
        guard response.status == 200 else { throw BenchFailure("the test server took no fault (HTTP \(response.status))") }
    }
}
