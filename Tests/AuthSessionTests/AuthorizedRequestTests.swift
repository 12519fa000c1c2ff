import AuthSession
import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

/// `TokenSession.authorizedRequest` against the test server's protected API (`/api/notes`,
/// Tests/AuthServer/protected_api.py), which answers each challenge on demand and counts what
/// it saw; the refreshes are counted by the authorization server itself.
@Suite("An API's challenges: invalid_token, use_dpop_nonce, step-up, resource metadata", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct AuthorizedRequestTests {
    static func get(_ f: SessionFixture) -> HTTPRequest { HTTPRequest(method: "GET", url: f.server.notesURL) }

    static func json(_ response: HTTPResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    @Test("a good token: one request, Bearer, no refresh")
    func plainRequest() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        var request = Self.get(f)
        request.headers["Authorization"] = "Bearer stale-value-the-app-left"
        let response = try await f.session.authorizedRequest(request, account: "alice")
        #expect(response.status == 200)
        #expect(try Self.json(response)["sub"] as? String == "001122.apple.user")
        #expect(try f.server.resourceCounter("requests") == 1)
        #expect(try f.server.stats().refreshGrants == 0)
    }

    @Test("invalid_token costs exactly one refresh and one retry, counted at the server")
    func invalidTokenRenewsOnce() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        try f.server.resource(["invalid_token_next": 1])
        let before = try f.server.stats().refreshGrants
        let response = try await f.session.authorizedRequest(Self.get(f), account: "alice")
        #expect(response.status == 200)
        #expect(try f.server.stats().refreshGrants - before == 1)
        #expect(try f.server.resourceCounter("requests") == 2)
        #expect(try f.server.resourceCounter("forced_invalid") == 1)
        metric("api_invalid_token", ["refreshes": try f.server.stats().refreshGrants - before, "api_requests": 2])
    }

    @Test("invalid_token again after the renewal is accessTokenRejected: no loop, the session kept")
    func secondInvalidTokenIsAnError() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        try f.server.resource(["invalid_token_next": 5])
        let before = try f.server.stats().refreshGrants
        do {
            _ = try await f.session.authorizedRequest(Self.get(f), account: "alice")
            Issue.record("expected accessTokenRejected")
        } catch let error as AuthSessionError {
            #expect(error.code == .accessTokenRejected, "\(error)")
            #expect(error.httpStatus == 401 && error.oauthError == "invalid_token")
            #expect(!error.requiresInteraction)
        }
        #expect(try f.server.stats().refreshGrants - before == 1)
        #expect(try f.server.resourceCounter("requests") == 2)
        #expect(try f.session.canRenew(account: "alice"))
    }

    @Test("a revoked grant: invalid_token, the renewal is refused, interactionRequired")
    func revokedGrant() async throws {
        let f = try SessionFixture()
        let token = try #require(try await f.signIn().accessToken.token.stringValue())
        try f.server.revokeGrant(containing: token)
        await expectAuthCode(.interactionRequired) { try await f.session.authorizedRequest(Self.get(f), account: "alice") }
        #expect(try f.server.resourceCounter("requests") == 1)
    }

    @Test("step-up round trip: stepUpRequired(acr, maxAge), a sign-in with them, the call succeeds")
    func stepUpRoundTrip() async throws {
        let f = try SessionFixture()
        let user = "001122.apple.user"
        try await f.signIn(appleUserID: user)
        let mfa = "urn:tokenstore:test:mfa"
        try f.server.resource(["acr_values": [mfa], "max_age": 600, "age_sign_ins": 3600])
        let error: AuthSessionError
        do {
            _ = try await f.session.authorizedRequest(Self.get(f), account: "alice")
            Issue.record("expected stepUpRequired")
            return
        } catch let thrown as AuthSessionError {
            error = thrown
        }
        #expect(error.code == .stepUpRequired, "\(error)")
        #expect(error.requiredACRValues == [mfa])
        #expect(error.requiredMaxAge == .seconds(600))
        #expect(error.requiresInteraction && error.oauthError == "insufficient_user_authentication" && error.httpStatus == 401)
        #expect(try f.server.stats().refreshGrants == 0, "a step-up is not a renewal")
        #expect(try f.session.canRenew(account: "alice"), "the session is kept")

        // The app signs the user in again with the API's values (acr_values and max_age); the
        // test server's login meets the asked acr, puts it in the ID token and on the grant, so
        // the access tokens of this sign-in carry it to the API.
        let redirect = try BrowserSignInTests.registeredRedirect(f.server, ports: try BrowserSignInTests.freePorts(1))
        try f.server.setNextAppleUser(user)
        // (The sign-in itself checks the ID token's acr against acrValues.)
        _ = try await f.session.signIn(
            account: "alice", redirectURIs: redirect, maxAge: error.requiredMaxAge, acrValues: error.requiredACRValues ?? [],
            browser: BrowserSignInTests.scriptedBrowser())
        let asked = try #require(try f.server.authorizations().last)
        #expect(asked.acrValues == mfa && asked.maxAge == "600", "the sign-in asked for the API's acr and max_age: \(asked)")
        let response = try await f.session.authorizedRequest(Self.get(f), account: "alice")
        #expect(response.status == 200)
        #expect(try Self.json(response)["acr"] as? String == mfa)
        #expect(try f.server.resourceCounter("step_ups") == 1)
    }

    @Test("a resource_metadata naming another authorization server is refused, never followed")
    func foreignResourceMetadata() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        try f.server.resource(["resource_metadata": "foreign", "invalid_token_next": 1])
        let before = try f.server.stats()
        do {
            _ = try await f.session.authorizedRequest(Self.get(f), account: "alice")
            Issue.record("expected issuerMismatch")
        } catch let error as AuthSessionError {
            #expect(error.code == .issuerMismatch, "\(error)")
            #expect(!error.description.contains("foreign-as.example"))
        }
        #expect(try f.server.resourceCounter("metadata_requests") == 1)
        #expect(try f.server.resourceCounter("requests") == 1, "no retry")
        let after = try f.server.stats()
        #expect(after.refreshGrants == before.refreshGrants && after.tokenRequests == before.tokenRequests, "nothing sent to any token endpoint")
    }

    @Test("a resource_metadata naming this server: checked once, then invalid_token handled as usual")
    func ownResourceMetadata() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        try f.server.resource(["resource_metadata": "own", "invalid_token_next": 1])
        let response = try await f.session.authorizedRequest(Self.get(f), account: "alice")
        #expect(response.status == 200)
        #expect(try f.server.resourceCounter("metadata_requests") == 1)
        #expect(try f.server.stats().refreshGrants == 1)
    }

    @Test("metadata of another resource, or not JSON, is not used: unexpectedResponse")
    func unusableResourceMetadata() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        for mode in ["other_resource", "not_json"] {
            try f.server.resource(["resource_metadata": mode, "invalid_token_next": 1])
            await expectAuthCode(.unexpectedResponse) { try await f.session.authorizedRequest(Self.get(f), account: "alice") }
        }
        #expect(try f.server.stats().refreshGrants == 0)
    }

    @Test("DPoP-bound: the proof is made, use_dpop_nonce kept and retried once, invalid_token renews once")
    func dpopBound() async throws {
        let f = try SessionFixture()
        let session = try DPoPSessionTests.session(f)
        try await DPoPSessionTests.signIn(f, session)
        try f.server.dpop(["resource_nonce": true, "rotate_nonce": true])
        let challengesBefore = try f.server.counter("dpop_nonce_challenges")
        let first = try await session.authorizedRequest(Self.get(f), account: "alice")
        #expect(first.status == 200)
        #expect(try f.server.counter("dpop_nonce_challenges") - challengesBefore == 1)
        #expect(try f.server.resourceCounter("requests") == 2)
        // invalid_token with a DPoP token: one renewal (a DPoP refresh), one retry.
        try f.server.resource(["invalid_token_next": 1])
        let refreshes = try f.server.stats().refreshGrants
        let second = try await session.authorizedRequest(HTTPRequest(method: "POST", url: f.server.notesURL), account: "alice")
        #expect(second.status == 200)
        let method = try Self.json(second)["method"] as? String
        #expect(method == "POST")
        #expect(try f.server.stats().refreshGrants - refreshes == 1)
        #expect(try f.server.resourceCounter("requests") == 4)
    }

    @Test("a use_dpop_nonce refused twice in a row is answered as it is after one retry")
    func dpopNonceOnce() async throws {
        let f = try SessionFixture()
        let session = try DPoPSessionTests.session(f)
        try await DPoPSessionTests.signIn(f, session)
        try f.server.dpop(["resource_nonce": true, "reject_next": 2])
        let response = try await session.authorizedRequest(Self.get(f), account: "alice")
        #expect(response.status == 401)
        #expect(try AuthenticationChallenge.parse(response).first?.error == "use_dpop_nonce")
        #expect(try f.server.resourceCounter("requests") == 2)
    }

    @Test("an oversize WWW-Authenticate is unexpectedResponse; other answers are returned as they are")
    func hostileAnswers() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        let huge = "Bearer error=\"invalid_token\", x=\"" + String(repeating: "a", count: 20_000) + "\""
        try f.server.inject(AuthorizationServer.Fault(path: "/api/notes", status: 401, headers: ["WWW-Authenticate": huge]))
        await expectAuthCode(.unexpectedResponse) { try await f.session.authorizedRequest(Self.get(f), account: "alice") }
        try f.server.inject(.status(503, path: "/api/notes"))
        #expect(try await f.session.authorizedRequest(Self.get(f), account: "alice").status == 503)
        try f.server.inject(AuthorizationServer.Fault(path: "/api/notes", status: 401, headers: ["WWW-Authenticate": "Basic realm=\"x\""]))
        #expect(try await f.session.authorizedRequest(Self.get(f), account: "alice").status == 401)
        #expect(try f.server.stats().refreshGrants == 0)
    }

    @Test("a token is never sent to plain http off loopback nor with credentials in the URL")
    func insecureURLs() async throws {
        let f = try SessionFixture()
        try await f.signIn()
        for url in ["http://api.example.com/notes", "https://user:pw@api.example.com/", "ftp://127.0.0.1/x"] {
            await expectAuthCode(.insecureConfiguration) {
                try await f.session.authorizedRequest(HTTPRequest(method: "GET", url: URL(string: url)!), account: "alice")
            }
        }
    }
}
