import Foundation
import TestTraits
import Testing
import TestSupport

/// tokenctl with a proxy in its environment, talking to a loopback authorization server.
@Suite("tokenctl with a proxy in the environment", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ProxyEnvironmentTests {
    /// Reproduces security review finding 9 the way the review did: `tokenctl` run with
    /// `http_proxy` (and `HTTP_PROXY`, `ALL_PROXY`, `all_proxy`) pointing at a local listener
    /// that answers 200 to anything. Over FoundationNetworking the listener received
    /// `POST http://localhost:…/oauth/revoke … token=RT-…` in clear and tokenctl printed
    /// "revoked" although the server never revoked. Now the login and the logout go
    /// straight to the server: the "proxy" sees no connection and the token is really revoked.
    @Test func loginAndLogoutBypassTheProxy() throws {
        let proxy = try RawLoopbackServer { connection in
            connection.readHead()
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        }
        defer { proxy.stop() }
        let store = try TokenctlStore()
        let server = try AuthorizationServer()
        defer { server.stop() }
        let port = try #require(server.baseURL.port)
        let address = proxy.url.absoluteString
        let environment = [
            "TOKENCTL_DOMAIN": server.baseURL.absoluteString, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID,
            "http_proxy": address, "HTTP_PROXY": address, "all_proxy": address, "ALL_PROXY": address,
        ]
        let userID = "000111.\(UUID().uuidString.prefix(8)).apple"
        let code = try server.appleAuthorizationCode(for: userID)
        let login = try store.run(
            ["login", "--account", "alice", "--apple-user-id", userID, "--scope", "read:items"], stdin: code + "\n",
            environment: environment)
        #expect(login.exitCode == 0, "\(login.standardError)")
        let refreshToken = try #require(
            try store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)
        // The logout by name, as in the review (the ID token's issuer is the address, so the
        // sign-in above uses it).
        let logout = try store.json(
            ["logout", "--account", "alice", "--domain", "http://localhost:\(port)"], environment: environment)
        #expect(logout.result.exitCode == 0, "\(logout.result.standardError)")
        #expect(logout.object["outcome"] as? String == "revoked")
        #expect(proxy.connections == 0, "the proxy saw \(proxy.connections) connections")
        #expect(try server.introspect(refreshToken).active == false)
    }
}
