@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// The device grant (RFC 8628) against Debian's glewlwyd 2.7.5, a server nobody here wrote. The
/// session polls; the user's side is played as a person would play it: the verification URI
/// opened in a browser on "another device" (headless Chromium, glewlwyd's login step signing the
/// test user in, glewlwyd's device page approving the code). The session itself never opens a
/// browser.
@Suite("glewlwyd: device sign-in approved in a browser", sessionKeyringTrait, chromiumTrait, glewlwydTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct GlewlwydDeviceSignInTests {
    /// Signs in with the device grant; `approve` opens the verification URI in headless
    /// Chromium once the session handed it over.
    static func deviceSignIn(
        _ server: GlewlwydServer, _ session: TokenSession, account: AccountID = "alice"
    ) async throws -> (SignInResult, DeviceAuthorization) {
        let codes = DeviceSignInTests.CodeBox()
        let signIn = Task { try await session.signInWithDevice(account: account, scopes: ["openid", "read"], onUserCode: codes.add) }
        let code = try await codes.first(of: signIn)
        let page = try #require(code.verificationURIComplete)
        let status = try await offPool { try server.openInBrowser(page) }
        #expect(status == 0, "headless-chromium exit status")
        return (try await signIn.value, code)
    }

    @Test("public client by discovery: glewlwyd's user code approved in Chromium while the session polls; stored, bound, refreshable")
    func approvedInBrowser() async throws {
        let start = ContinuousClock.now
        let server = try GlewlwydServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try GlewlwydChromiumSignInTests.session(server, store: store)
        let (result, code) = try await Self.deviceSignIn(server, session)
        metric("device_signin_glewlwyd", ["seconds": String(format: "%.2f", (ContinuousClock.now - start) / .seconds(1))])
        #expect(code.verificationURI.absoluteString == server.issuer + "/device")
        #expect(code.verificationURIComplete?.absoluteString == server.issuer + "/device?code=" + code.userCode)
        #expect(code.interval == .seconds(1))
        let claims = DjangoOAuthChromiumSignInTests.claims(try #require(result.idToken?.stringValue()))
        #expect(claims["iss"] as? String == server.issuer)
        #expect(result.accessToken.grantedScopes.contains("read"))
        #expect(try server.userinfoAccepts(try #require(result.accessToken.token.stringValue())))
        let endpoints = try #require(try store.boundRefreshToken(account: "alice")?.endpoints)
        #expect(endpoints == ServerEndpoints(issuer: server.issuer, token: server.issuer + "/token", revocation: server.issuer + "/revoke"))
        let first = try #require(try store.refreshToken(account: "alice")?.stringValue())
        #expect(try await session.renew(account: "alice", scopes: ["read"]).source == .network)
        #expect(try server.refreshTokenIsRefused(first), "rotated like a browser sign-in's")
        #expect(try server.query("SELECT count(*) FROM gpo_device_authorization WHERE gpoda_status = 2") == "1", "glewlwyd redeemed one device code")
    }

    @Test("a DPoP-bound device sign-in: dpop_jkt at glewlwyd's device authorization, proofs on the polls, cnf.jkt our key")
    func dpopBound() async throws {
        let server = try GlewlwydServer()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID)
        let session = try GlewlwydChromiumSignInTests.session(server, store: store, dpop: true)
        let (result, _) = try await Self.deviceSignIn(server, session)
        let jkt = try #require(try await DPoPKeys.load(store: store)).thumbprint
        #expect(result.accessToken.tokenType == "DPoP")
        let access = DjangoOAuthChromiumSignInTests.claims(try #require(result.accessToken.token.stringValue()))
        #expect((access["cnf"] as? [String: Any])?["jkt"] as? String == jkt)
        #expect(try server.query("SELECT gpoda_dpop_jkt FROM gpo_device_authorization") == jkt, "glewlwyd recorded our key with the code")
        #expect(try await session.renew(account: "alice", scopes: ["read"]).source == .network)
        let rt = try #require(try store.refreshToken(account: "alice")?.stringValue())
        #expect(try server.refreshTokenIsRefused(rt), "without a proof glewlwyd refuses the bound refresh token")
    }
}
