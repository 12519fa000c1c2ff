@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Pushed authorization requests (RFC 9126) against Debian's glewlwyd 2.7.5, which advertises
/// `pushed_authorization_request_endpoint`: the browser sign-in pushes, and headless Chromium is
/// given only `client_id` and `request_uri` (read back from the start page's redirect, and from
/// glewlwyd's own record of the pushed request: state, nonce, PKCE challenge and, when bound,
/// the DPoP key's thumbprint are in its database, not in the URL).
@Suite("glewlwyd: PAR, and PAR + DPoP, with headless Chromium", sessionKeyringTrait, chromiumTrait, glewlwydTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct GlewlwydPARSignInTests {
    static func signIn(_ dpop: Bool) async throws -> (GlewlwydServer, TokenStore, SignInResult, URL, TemporaryDirectory) {
        let server = try GlewlwydServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try GlewlwydChromiumSignInTests.session(server, store: store, dpop: dpop)
        let metadata = try await session.client.metadata()
        #expect(metadata.pushedAuthorizationRequestEndpoint?.absoluteString == server.issuer + "/par")
        let location = URLBox()
        let result = try await GlewlwydChromiumSignInTests.chromiumSignIn(session, location: location)
        return (server, store, result, try #require(location.value), directory)
    }

    @Test("the browser's URL is glewlwyd's /auth with client_id and request_uri only; the request itself is in glewlwyd's PAR table")
    func pushed() async throws {
        let (server, store, result, url, _) = try await Self.signIn(false)
        #expect(url.absoluteString.hasPrefix(server.issuer + "/auth?"))
        #expect(PARSignInTests.queryNames(url) == ["client_id", "request_uri"], "\(url)")
        let uri = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).first { $0.name == "request_uri" }?.value
        #expect(uri?.hasPrefix("urn:ietf:params:oauth:request_uri:") == true)
        #expect(try server.query("SELECT count(*) FROM gpo_par") == "1")
        #expect(try server.query("SELECT count(*) FROM gpo_par WHERE gpop_state IS NOT NULL AND gpop_nonce IS NOT NULL AND gpop_code_challenge IS NOT NULL") == "1",
            "state, nonce and the PKCE challenge went to glewlwyd in the push")
        #expect(try server.query("SELECT gpop_status FROM gpo_par") == "2", "glewlwyd completed the pushed request")
        #expect(try store.refreshToken(account: "alice") != nil)
        #expect(result.accessToken.grantedScopes.contains("read"))
    }

    @Test("PAR + DPoP: a proof at glewlwyd's /par binds the request to our key; the tokens are DPoP-bound")
    func pushedAndBound() async throws {
        let (server, store, result, url, _) = try await Self.signIn(true)
        #expect(PARSignInTests.queryNames(url) == ["client_id", "request_uri"], "dpop_jkt was pushed, not put in the URL")
        let jkt = try #require(try await DPoPKeys.load(store: store)).thumbprint
        #expect(try server.query("SELECT gpop_dpop_jkt FROM gpo_par") == jkt, "glewlwyd recorded the proof's key with the pushed request")
        #expect(result.accessToken.tokenType == "DPoP")
        let access = DjangoOAuthChromiumSignInTests.claims(try #require(result.accessToken.token.stringValue()))
        #expect((access["cnf"] as? [String: Any])?["jkt"] as? String == jkt)
        #expect(try store.dpopBinding(account: "alice") == jkt)
    }
}
