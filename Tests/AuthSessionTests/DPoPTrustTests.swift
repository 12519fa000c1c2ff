import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@testable import AuthSession

/// What a DPoP proof may be made for, how `htu` and a nonce's origin are spelled, and what a
/// session does when a server does not bind what it was asked to bind (the third security
/// review's S2 and S6), against the real test server.
@Suite("DPoP: proof URLs, normalised htu, unbound answers", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPTrustTests {
    @Test("htu and a nonce's origin: no user information, scheme and host in lower case, no default port, no query or fragment")
    func normalisedURLs() {
        #expect(DPoPProof.htu("HTTPS://user:pw@API.Example.COM:443/Items/A?x=1#frag") == "https://api.example.com/Items/A")
        #expect(DPoPProof.htu("http://127.0.0.1:80/userinfo") == "http://127.0.0.1/userinfo")
        #expect(DPoPProof.htu("http://127.0.0.1:8080/userinfo?x") == "http://127.0.0.1:8080/userinfo")
        #expect(DPoPProof.origin(URL(string: "HTTPS://API.EXAMPLE.COM:443/x")!) == "https://api.example.com")
        #expect(DPoPProof.origin(URL(string: "https://api.example.com:8443/x")!) == "https://api.example.com:8443")
        #expect(DPoPBinding.origin(URL(string: "https://Api.Example.com/y")!) == DPoPBinding.origin(URL(string: "https://api.example.com:443/z")!))
    }

    @Test("the proof API refuses the server's token and revocation endpoints (any spelling), user information and plain http to another host")
    func proofRefusals() async throws {
        let f = try SessionFixture()
        let session = try DPoPSessionTests.session(f)
        let token = try await DPoPSessionTests.signIn(f, session).accessToken
        let base = f.server.baseURL.absoluteString
        let port = f.server.port
        for url in [
            base + "/oauth/token", base + "/oauth/revoke", "HTTP://127.0.0.1:\(port)/oauth/token?x=1",
            "http://user:pw@127.0.0.1:\(port)/userinfo", "http://api.example.com/items",
        ] {
            await expectAuthCode(.insecureConfiguration) {
                try await session.dpopProof(method: "POST", url: URL(string: url)!, accessToken: token)
            }
        }
        // The API (userinfo stands for it) and https anywhere are fine.
        let proof = try await session.dpopProof(method: "GET", url: URL(string: base + "/userinfo")!, accessToken: token)
        #expect(try f.server.userinfo(authorization: token.authorizationHeaderValue(), dpop: proof).status == 200)
        _ = try await session.dpopProof(method: "GET", url: URL(string: "https://api.example.com/items")!, accessToken: token)
    }

    @Test("a server that answers a DPoP sign-in unbound (Bearer): refused, nothing stored, the unbound refresh token revoked")
    func unboundSignInRefused() async throws {
        let f = try SessionFixture()
        _ = try f.server.dpop(["ignore_proofs": true])
        let session = try DPoPSessionTests.session(f)
        await expectAuthCode(.unexpectedResponse) { try await DPoPSessionTests.signIn(f, session) }
        #expect(try f.store.items().isEmpty)
        #expect(try f.server.stats().revocations == 1, "the unbound refresh token the server issued was revoked")
    }

    @Test("a DPoP-bound refresh answered Bearer: an error; the rotated refresh token is kept, the access token not handed out")
    func unboundRefreshRefused() async throws {
        let f = try SessionFixture()
        let session = try DPoPSessionTests.session(f)
        try await DPoPSessionTests.signIn(f, session)
        let answer = #"{"access_token":"plain-at","token_type":"Bearer","expires_in":3600,"refresh_token":"rotated-rt"}"#
        try f.server.inject(.status(200, path: "/oauth/token", body: answer, contentType: "application/json"))
        await expectAuthCode(.unexpectedResponse) { try await session.renew(account: "alice", scopes: ["read:items"]) }
        #expect(try f.refreshToken() == "rotated-rt", "the rotated refresh token is not lost")
        let cached = try await session.accessToken(for: "alice", scopes: ["read:items"], minimumTTL: .zero)
        #expect(cached.token.stringValue() != "plain-at" && cached.tokenType == "DPoP", "the unbound token was not cached")
        #expect(try f.store.dpopBinding(account: "alice") != nil, "the account stays bound")
    }
}
