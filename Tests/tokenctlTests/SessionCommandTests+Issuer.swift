import Foundation
import Testing
import TestSupport

extension SessionCommandTests {
    @Test("--issuer (TOKENCTL_ISSUER): login and logout through discovered endpoints; entra logout is notRevocable")
    func issuerOption() throws {
        for (profile, path) in [("keycloak", "/realms/test"), ("entra", "/common/v2.0")] {
            let fixture = try Fixture()
            try fixture.server.setProfile(profile)
            let issuer = fixture.server.baseURL.absoluteString + path
            let environment = ["TOKENCTL_ISSUER": issuer, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID]
            let userID = "000111.\(UUID().uuidString.prefix(8)).\(profile)"
            let code = try fixture.server.appleAuthorizationCode(for: userID)
            let login = try fixture.store.run(
                ["login", "--account", "alice", "--apple-user-id", userID], stdin: code, environment: environment)
            #expect(login.exitCode == 0, "\(profile): \(login.standardError)")
            // status shows what discovery found (the document kept beside the store).
            let status = try fixture.store.json(["status"], environment: environment)
            let discovery = try #require(status.object["discovery"] as? [String: Any], "\(profile)")
            #expect(discovery["issuer"] as? String == issuer)
            #expect((discovery["tokenEndpoint"] as? String)?.hasPrefix(fixture.server.baseURL.absoluteString) == true)
            if profile == "entra" {
                #expect(discovery["revocationEndpoint"] is NSNull, "entra: no revocation endpoint")
            } else {
                #expect(discovery["revocationEndpoint"] as? String != nil, "\(profile)")
            }
            let text = try fixture.store.run(["status"], environment: environment)
            #expect(text.standardOutput.contains("issuer               \(issuer) (discovered "), "\(text.standardOutput)")
            let logout = try fixture.store.json(["logout", "--account", "alice"], environment: environment)
            #expect(logout.result.exitCode == 0, "\(profile): \(logout.result.standardError)")
            #expect(logout.object["outcome"] as? String == (profile == "entra" ? "notRevocable" : "revoked"), "\(profile)")
            #expect(logout.object["pendingRevocations"] as? Int == 0, "\(profile)")
        }
    }

    @Test("--domain and --issuer together are a usage error (64); neither names --domain")
    func domainOrIssuer() throws {
        let fixture = try Fixture()
        let both = try fixture.store.run(
            ["logout", "--account", "alice", "--domain", "https://a.example", "--issuer", "https://b.example",
             "--client-id", "c"])
        #expect(both.exitCode == 64)
        #expect(both.standardError.contains("--issuer"))
        let neither = try fixture.store.run(["logout", "--account", "alice", "--client-id", "c"], environment: [:])
        #expect(neither.exitCode == 64)
        #expect(neither.standardError.contains("--domain"))
    }
}
