import Foundation
import TestTraits
import Testing
import TestSupport

/// The third security review's S1 and S2, black-box: someone who can write the store's folder
/// but not read the keyring edits what tokenctl reads back about the server. A second test
/// server on loopback stands for the attacker's and counts what reaches it.
@Suite("tokenctl: endpoints never from a file beside the store", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DiscoveryTrustCommandTests {
    struct Fixture {
        let store = try! TokenctlStore()
        let server: AuthorizationServer
        let attacker: AuthorizationServer
        var issuer: String { server.baseURL.absoluteString + "/realms/test" }
        var environment: [String: String] { ["TOKENCTL_ISSUER": issuer, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID] }

        init() throws {
            server = try AuthorizationServer()
            try server.setProfile("keycloak")
            attacker = try AuthorizationServer()
            let userID = "000111.\(UUID().uuidString.prefix(8)).trust"
            let code = try server.appleAuthorizationCode(for: userID)
            let login = try store.run(["login", "--account", "alice", "--apple-user-id", userID], stdin: code, environment: environment)
            #expect(login.exitCode == 0, "\(login.standardError)")
        }

        func run(_ arguments: [String]) throws -> TokenctlResult { try store.run(arguments, environment: environment) }

        /// What reached the attacker's server.
        func stolen() throws -> Int {
            let stats = try attacker.stats()
            return stats.tokenRequests + stats.revokeRequests
        }
    }

    @Test("the review's experiment: a discovery file beside the store naming another server's endpoints sends it nothing; logout really revokes")
    func editedFileBesideTheStore() throws {
        let fixture = try Fixture()
        // The format the earlier versions wrote and read back, fresh, with the attacker's endpoints.
        let base = fixture.issuer + "/protocol/openid-connect"
        let forged = #"{"configuredIssuer":"\#(fixture.issuer)","fetchedAt":\#(Date().timeIntervalSince1970),"#
            + #""metadata":{"issuer":"\#(fixture.issuer)","authorizationEndpoint":"\#(base)/auth","#
            + #""tokenEndpoint":"\#(fixture.attacker.tokenURL)","revocationEndpoint":"\#(fixture.attacker.revokeURL)","#
            + #""jwksURI":"\#(base)/certs","authorizationResponseIssParameterSupported":false,"isAuth0":false}}"#
        let file = URL(fileURLWithPath: fixture.store.path + ".discovery.json")
        try Data(forged.utf8).write(to: file)
        #expect(chmod(file.path, 0o600) == 0)
        let grants = try fixture.server.stats().refreshGrants
        let token = try fixture.run(["token", "--account", "alice", "--force"])
        #expect(token.exitCode == 0, "\(token.standardError)")
        #expect(try fixture.server.stats().refreshGrants == grants + 1, "the refresh went to the server that issued the token")
        let logout = try fixture.run(["logout", "--account", "alice"])
        #expect(logout.exitCode == 0, "\(logout.standardError)")
        #expect(try fixture.server.stats().revocations == 1, "revoked at the real server")
        #expect(try fixture.stolen() == 0, "the attacker's server got the refresh token")
    }

    @Test("an edited, truncated or swapped sealed document: token and logout exit 65 and send nothing; verify exits 65 naming discovery")
    func alteredSealedDocument() throws {
        let fixture = try Fixture()
        let other = try Fixture()  // another store of the same issuer
        #expect(try fixture.store.sqlite("SELECT count(*) FROM discovery") == "1", "the document is kept sealed in the store")
        #expect(try fixture.run(["verify"]).exitCode == 0)
        let original = try fixture.store.sqlite("SELECT hex(sealed) FROM discovery")
        let foreign = try other.store.sqlite("SELECT hex(sealed) FROM discovery")
        let damages = [
            "edited": "UPDATE discovery SET sealed = CAST(substr(sealed, 1, 50) || "
                + "CASE WHEN substr(sealed, 51, 1) = x'00' THEN x'01' ELSE x'00' END || substr(sealed, 52) AS BLOB)",
            "truncated": "UPDATE discovery SET sealed = substr(sealed, 1, 40)",
            "swapped": "UPDATE discovery SET sealed = x'\(foreign)'",
        ]
        for (name, damage) in damages.sorted(by: { $0.key < $1.key }) {
            _ = try fixture.store.sqlite("UPDATE discovery SET sealed = x'\(original)'")
            _ = try fixture.store.sqlite(damage)
            let before = try fixture.server.stats()
            for command in [["token", "--account", "alice", "--force"], ["logout", "--account", "alice"]] {
                let result = try fixture.run(command)
                #expect(result.exitCode == 65, "\(name) \(command[0]): \(result.standardError)")
                #expect(result.standardError.contains("integrityCheckFailed"), "\(name): \(result.standardError)")
            }
            let after = try fixture.server.stats()
            #expect(after.tokenRequests == before.tokenRequests && after.revokeRequests == before.revokeRequests, "\(name)")
            #expect(try fixture.json(["accounts"]).contains("\"authorized\""), "\(name): still signed in, nothing changed")
            let verify = try fixture.run(["verify"])
            #expect(verify.exitCode == 65, "\(name)")
            #expect(verify.standardOutput.contains("discovery"), "\(name): \(verify.standardOutput)")
        }
        // The way back: the document is public, so dropping the damaged copy loses nothing.
        let dropped = try fixture.run(["discard", "--discovery"])
        #expect(dropped.exitCode == 0, "\(dropped.standardError)")
        #expect(try fixture.run(["verify"]).exitCode == 0)
        #expect(try fixture.run(["token", "--account", "alice", "--force"]).exitCode == 0)
        #expect(try fixture.stolen() == 0 && other.stolen() == 0)
    }

    @Test("proof refuses the authorization server's token and revocation endpoints; an API's URL is fine")
    func proofRefusesTheServersEndpoints() throws {
        let fixture = try Fixture()
        let store = try TokenctlStore()
        let environment = ["TOKENCTL_DOMAIN": fixture.attacker.baseURL.absoluteString, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID]
        let userID = "000111.\(UUID().uuidString.prefix(8)).proof"
        let code = try fixture.attacker.appleAuthorizationCode(for: userID)
        let login = try store.run(["login", "--dpop", "--account", "bob", "--apple-user-id", userID], stdin: code, environment: environment)
        #expect(login.exitCode == 0, "\(login.standardError)")
        let base = fixture.attacker.baseURL.absoluteString
        for url in [base + "/oauth/token", base + "/oauth/revoke", base.uppercased().replacing("HTTP://", with: "http://") + "/oauth/token",
                    "http://user:pw@" + base.dropFirst("http://".count) + "/userinfo", "http://api.example.com/items"] {
            let refused = try store.run(["proof", "--account", "bob", "--method", "POST", "--url", url], environment: environment)
            #expect(refused.exitCode != 0 && refused.standardOutput.isEmpty, "\(url): \(refused.standardOutput)")
        }
        let api = try store.run(["proof", "--account", "bob", "--method", "GET", "--url", base + "/userinfo"], environment: environment)
        #expect(api.exitCode == 0 && api.standardOutput.split(separator: ".").count == 3, "\(api.standardError)")
    }
}

extension DiscoveryTrustCommandTests.Fixture {
    /// `--json` output of a command, as text.
    func json(_ arguments: [String]) throws -> String { try store.run(["--json"] + arguments, environment: environment).standardOutput }
}
