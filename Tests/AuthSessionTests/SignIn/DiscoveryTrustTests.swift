import Foundation
import TestTraits
import Testing
import TestSupport

@testable import AuthSession
@testable import TokenStore

/// Nothing the session reads back from disk decides where a token goes unless it is sealed:
/// the discovery document is kept sealed in the store and checked again on every read, and a
/// refresh token is bound to the endpoints that issued it (the third security review's S1).
/// Against the real test server (keycloak profile) and a second server standing for an
/// attacker's, which counts what reaches it.
@Suite("Discovery kept sealed, tokens bound to their endpoints", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DiscoveryTrustTests {
    static func configuration(_ f: SessionFixture, lifetime: Duration = .seconds(3600)) throws -> AuthorizationServerConfiguration {
        var configuration = try AuthorizationServerConfiguration(
            issuer: f.server.baseURL.absoluteString + "/realms/test", clientID: AuthorizationServer.publicClientID,
            requestTimeout: .seconds(5))
        configuration.discoveryLifetime = lifetime
        return configuration
    }

    static func signIn(_ f: SessionFixture, _ session: TokenSession, user: String = "001122.trust.user") async throws {
        let code = try f.server.appleAuthorizationCode(for: user)
        try await session.signInWithApple(
            authorizationCode: SecretBytes(utf8: code), appleUserID: user, account: "alice", scopes: ["openid", "read:items"])
    }

    /// Keycloak's discovery document with its token and revocation endpoints replaced.
    static func document(_ f: SessionFixture, token: String, revocation: String) -> String {
        let issuer = f.server.baseURL.absoluteString + "/realms/test"
        return #"{"issuer":"\#(issuer)","authorization_endpoint":"\#(issuer)/protocol/openid-connect/auth","#
            + #""token_endpoint":"\#(token)","revocation_endpoint":"\#(revocation)","#
            + #""jwks_uri":"\#(issuer)/protocol/openid-connect/certs","#
            + #""scopes_supported":["openid","profile","email","offline_access","read:items","write:items"]}"#
    }

    @Test("a sign-in binds the refresh token to the endpoints that issued it; renewal keeps the binding; an outbox entry carries it")
    func signInBindsEndpoints() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        let session = TokenSession(store: f.store, configuration: try Self.configuration(f), retryPolicy: fastPolicy)
        try await Self.signIn(f, session)
        let base = f.server.baseURL.absoluteString + "/realms/test/protocol/openid-connect"
        let expected = ServerEndpoints(
            issuer: f.server.baseURL.absoluteString + "/realms/test", token: base + "/token", revocation: base + "/revoke")
        #expect(try f.store.boundRefreshToken(account: "alice")?.endpoints == expected)
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(try f.store.boundRefreshToken(account: "alice")?.endpoints == expected)
        // Offline: the token waits in the outbox with where it is to be revoked.
        f.server.stopTemporarily()
        #expect(try await session.logout(account: "alice") == .revocationPending)
        #expect(try f.store.pendingRevocations().map(\.endpoints) == [expected])
    }

    @Test("a poisoned document fetched once does not redirect a bound session: renewal and logout go where the token was issued")
    func poisonedDocumentDoesNotRedirect() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        let attacker = try AuthorizationServer()
        // Always stale: every use fetches the document again.
        let session = TokenSession(store: f.store, configuration: try Self.configuration(f, lifetime: .zero), retryPolicy: fastPolicy)
        try await Self.signIn(f, session)
        let before = try f.server.stats()
        try f.server.inject(.status(
            200, path: "/__profile/openid-configuration",
            body: Self.document(f, token: attacker.tokenURL.absoluteString, revocation: attacker.revokeURL.absoluteString),
            contentType: "application/json"))
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(try f.server.stats().refreshGrants == before.refreshGrants + 1)
        try f.server.inject(.status(
            200, path: "/__profile/openid-configuration",
            body: Self.document(f, token: attacker.tokenURL.absoluteString, revocation: attacker.revokeURL.absoluteString),
            contentType: "application/json"))
        #expect(try await session.logout(account: "alice") == .revoked)
        #expect(try f.server.stats().revocations == before.revocations + 1)
        let stolen = try attacker.stats()
        #expect(stolen.tokenRequests == 0 && stolen.revokeRequests == 0, "the attacker's server got \(stolen)")
    }

    @Test("a server that really moved its endpoints (its document fetched now says so) is followed, and the change is on record")
    func movedServerIsFollowed() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        let session = TokenSession(store: f.store, configuration: try Self.configuration(f, lifetime: .zero), retryPolicy: fastPolicy)
        try await Self.signIn(f, session)
        let old = try #require(try f.store.boundRefreshToken(account: "alice")?.endpoints)
        // The same server under another name: its token endpoint moved from 127.0.0.1 to localhost.
        let moved = "http://localhost:\(f.server.port)/realms/test/protocol/openid-connect"
        try f.server.inject(.status(
            200, path: "/__profile/openid-configuration", count: 20,
            body: Self.document(f, token: moved + "/token", revocation: moved + "/revoke"),
            contentType: "application/json"))
        let grants = try f.server.stats().refreshGrants
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(try f.server.stats().refreshGrants == grants + 1)
        let now = try #require(try f.store.boundRefreshToken(account: "alice")?.endpoints)
        #expect(now.token == moved + "/token" && now.revocation == moved + "/revoke")
        let kept = try #require(try DiscoveryCache.documents(in: f.store).first)
        #expect(kept.document.changedAt != nil)
        #expect(kept.document.previousEndpoints == old)
        #expect(kept.metadata?.tokenEndpoint.absoluteString == moved + "/token")
    }

    @Test("an altered, truncated or swapped sealed document: integrityCheckFailed, nothing sent, nothing changed; verify names it; a moved one is not used")
    func alteredDocumentIsAnIntegrityFailure() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        let configuration = try Self.configuration(f)
        try await Self.signIn(f, TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy))
        // Another store's row of the same issuer, to swap in.
        let other = try SessionFixture()
        try other.server.setProfile("keycloak")
        _ = try await TokenSession(store: other.store, configuration: try Self.configuration(f), retryPolicy: fastPolicy).client.metadata()
        let foreign = try #require(try Database(path: other.path).firstRow("SELECT lookup, sealed FROM discovery") { ($0.blob(0), $0.blob(1)) })

        let raw = try Database(path: f.path)
        let (lookup, original) = try #require(try raw.firstRow("SELECT lookup, sealed FROM discovery") { ($0.blob(0), $0.blob(1)) })
        var flipped = original
        flipped[flipped.count / 2] ^= 0x04
        let damages: [(String, () throws -> Void)] = [
            ("edited", { try raw.run("UPDATE discovery SET sealed = ?", [.blob(flipped)]) }),
            ("truncated", { try raw.run("UPDATE discovery SET sealed = ?", [.blob(Array(original.prefix(30)))]) }),
            ("swapped", { try raw.run("UPDATE discovery SET sealed = ?", [.blob(foreign.1)]) }),
        ]
        for (name, damage) in damages {
            try raw.run("DELETE FROM discovery")
            try raw.run("INSERT INTO discovery(lookup, key_id, sealed, updated_at) SELECT ?, key_id, ?, 0 FROM data_keys LIMIT 1",
                [.blob(lookup), .blob(original)])
            try damage()
            let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
            let before = try f.server.stats()
            for call in ["renew", "logout"] {
                do {
                    if call == "renew" { _ = try await session.renew(account: "alice", scopes: ["read:items"]) }
                    else { _ = try await session.logout(account: "alice") }
                    Issue.record("\(name) \(call): expected integrityCheckFailed, got success")
                } catch let error as AuthSessionError {
                    #expect(storeCode(of: error) == .integrityCheckFailed, "\(name) \(call): \(error)")
                }
            }
            let after = try f.server.stats()
            #expect(after.tokenRequests == before.tokenRequests && after.revokeRequests == before.revokeRequests, "\(name)")
            #expect(try session.canRenew(account: "alice"), "\(name): nothing changed")
            let report = try f.store.verify()
            #expect(report.badRows.map(\.table) == ["discovery"], "\(name): \(report.badRows)")
        }
        // Moved under another row's key: it is not this issuer's document any more, so the session
        // has none and asks the server (the token still goes where it was issued); verify names the row.
        try raw.run("UPDATE discovery SET lookup = ?, sealed = ?", [.blob(foreign.0), .blob(original)])
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        let grants = try f.server.stats().refreshGrants
        _ = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(try f.server.stats().refreshGrants == grants + 1)
        #expect(try f.store.verify().badRows.map(\.table) == ["discovery"])
    }

    @Test("the document earlier versions kept in a file beside the store is never read, and a writing session removes it")
    func legacyFileIsIgnored() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("keycloak")
        let attacker = try AuthorizationServer()
        let configuration = try Self.configuration(f)
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        try await Self.signIn(f, session)
        // The earlier versions' format, naming the attacker's endpoints, fresh.
        let legacy = f.path + ".discovery.json"
        let metadata = try await session.client.metadata()
        let forged = #"{"configuredIssuer":"\#(configuration.issuer)","fetchedAt":\#(Date().timeIntervalSince1970),"#
            + #""metadata":{"issuer":"\#(metadata.issuer)","authorizationEndpoint":"\#(metadata.authorizationEndpoint)","#
            + #""tokenEndpoint":"\#(attacker.tokenURL)","revocationEndpoint":"\#(attacker.revokeURL)","#
            + #""jwksURI":"\#(metadata.jwksURI)","authorizationResponseIssParameterSupported":false,"isAuth0":false}}"#
        try Data(forged.utf8).write(to: URL(fileURLWithPath: legacy))
        let second = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        _ = try await second.renew(account: "alice", scopes: ["read:items"])
        #expect(try await second.logout(account: "alice") == .revoked)
        let stolen = try attacker.stats()
        #expect(stolen.tokenRequests == 0 && stolen.revokeRequests == 0)
        // A writing session keeping a document removes the stale file.
        var stale = configuration
        stale.discoveryLifetime = .zero
        try Data(forged.utf8).write(to: URL(fileURLWithPath: legacy))
        _ = try await TokenSession(store: f.store, configuration: stale, retryPolicy: fastPolicy).client.metadata()
        #expect(!FileManager.default.fileExists(atPath: legacy))
    }

    @Test("a kept document the server shows to be out of date (invalid_scope for offline_access) is fetched again once")
    func outOfDateScopesFetchedAgain() async throws {
        let f = try SessionFixture()
        try f.server.setProfile("google")
        var configuration = try AuthorizationServerConfiguration(
            issuer: f.server.baseURL.absoluteString, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.acceptedIssuerAliases = ["127.0.0.1:\(f.server.port)"]
        // A first process kept a document that still listed offline_access.
        let base = f.server.baseURL.absoluteString
        let older = #"{"issuer":"\#(base)","authorization_endpoint":"\#(base)/o/oauth2/v2/auth","#
            + #""token_endpoint":"\#(base)/token","revocation_endpoint":"http://localhost:\#(f.server.port)/revoke","#
            + #""jwks_uri":"\#(base)/oauth2/v3/certs","scopes_supported":["openid","email","profile","offline_access"]}"#
        try f.server.inject(.status(200, path: "/__profile/openid-configuration", body: older, contentType: "application/json"))
        #expect(try await TokenSession(store: f.store, configuration: configuration).client.metadata().offersOfflineAccess)
        // The server now refuses offline_access.
        try f.server.armBadRedirect(.oauthError("invalid_scope", description: "offline_access"))
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        let result = try await session.signIn(
            account: "alice", redirectURIs: redirect, timeout: .seconds(60), browser: BrowserSignInTests.scriptedBrowser())
        #expect(!result.accessToken.grantedScopes.contains("offline_access"))
        #expect(try f.server.stats().authorizations == 1, "one refused and one granted authorization request")
        #expect(try session.canRenew(account: "alice"))
        #expect(try await !session.client.metadata().offersOfflineAccess)
    }

    @Test("a {tenantid} issuer only for a configuration naming common, organizations or consumers; acceptedTenants narrows it")
    func tenantTemplateOnlyWhenAsked() throws {
        let template = "https://login.example.com/{tenantid}/v2.0"
        for segment in ["common", "organizations", "consumers"] {
            #expect(AuthorizationServerMetadata.issuer(template, fits: "https://login.example.com/\(segment)/v2.0"))
        }
        // A configuration naming one tenant, or any other path, is never widened by a document.
        #expect(!AuthorizationServerMetadata.issuer(template, fits: "https://login.example.com/9188040d/v2.0"))
        #expect(!AuthorizationServerMetadata.issuer("https://id.example.com/{tenantid}", fits: "https://id.example.com/iss"))
        let tid = "9188040d-6c67-4c5b-b112-36a304b66dad"
        #expect(IDTokenValidator.issuerMatches(
            "https://login.example.com/\(tid)/v2.0", expected: template, aliases: [], tenantID: tid, acceptedTenants: [tid]))
        #expect(!IDTokenValidator.issuerMatches(
            "https://login.example.com/\(tid)/v2.0", expected: template, aliases: [], tenantID: tid, acceptedTenants: ["other"]))
    }
}
