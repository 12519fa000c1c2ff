@testable import AuthSession
import Foundation
import Testing
import TestSupport
import TokenStore

/// The browser sign-in DPoP-bound (issue 27): the authorize request names the key (`dpop_jkt`,
/// RFC 9449 10) and the code exchange proves it.
extension BrowserSignInTests {
    @Test("a DPoP browser sign-in: authorize carries dpop_jkt, the exchange proves the key, the tokens are DPoP")
    func dpopBrowserSignIn() async throws {
        let f = try SessionFixture()
        var configuration = try AuthorizationServerConfiguration(
            domain: f.server.baseURL, clientID: AuthorizationServer.publicClientID, requestTimeout: .seconds(5))
        configuration.usesDPoP = true
        let session = TokenSession(store: f.store, configuration: configuration, retryPolicy: fastPolicy)
        let redirect = try Self.registeredRedirect(f.server, ports: try Self.freePorts(1))
        try f.server.setNextAppleUser("000792.browser.dpop", name: nil, email: nil, firstSignIn: false)
        let followed = URLBox()
        let result = try await session.signIn(
            account: "alice", redirectURIs: redirect, scopes: ["openid"],
            browser: StartFollowingOpener(next: Self.scriptedBrowser(), location: followed))
        let jkt = try #require(try await DPoPKeys.load(store: f.store)).thumbprint
        let url = try #require(followed.value)
        let query = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).filter { $0.name == "dpop_jkt" }
        #expect(query.map(\.value) == [jkt], "the code is bound to the key that redeems it")
        #expect(result.accessToken.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(result.accessToken.token.stringValue())).jkt == jkt)
        #expect(try f.store.dpopBinding(account: "alice") == jkt)
        #expect(try f.server.counter("dpop_key_mismatches") == 0)
    }
}
