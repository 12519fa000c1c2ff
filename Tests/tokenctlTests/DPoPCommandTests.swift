import Foundation
import Testing
import TestSupport
import TestTraits

/// `tokenctl login --dpop`, `token` and `proof` (issue 27 item 6) through the binary, against
/// the real authorization server (DPoP as Auth0 does it) and the private keyring.
@Suite("tokenctl DPoP: login --dpop, token type, proof", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    static func loginDPoP(_ fixture: Fixture, account: String = "alice", environment extra: [String: String] = [:], flag: Bool = true) throws
        -> TokenctlResult
    {
        let userID = "000777.\(UUID().uuidString.prefix(8)).apple"
        let code = try fixture.server.appleAuthorizationCode(for: userID)
        return try fixture.store.run(
            ["login", "--account", account, "--apple-user-id", userID, "--scope", "openid"] + (flag ? ["--dpop"] : []),
            stdin: code, environment: fixture.environment.merging(extra) { _, given in given })
    }

    /// The JSON of a JWT part.
    static func decode(_ part: Substring) throws -> [String: Any] {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("login --dpop: token says DPoP (network, then cache), later commands use the binding by themselves")
    func loginTokenDPoP() throws {
        let fixture = try Fixture()
        let login = try Self.loginDPoP(fixture)
        #expect(login.exitCode == 0, "\(login.standardError)")
        let cached = try fixture.json(["token", "--account", "alice", "--reveal"])
        #expect(cached.result.exitCode == 0, "\(cached.result.standardError)")
        #expect(cached.object["tokenType"] as? String == "DPoP" && cached.object["source"] as? String == "cache")
        let accessToken = try #require(cached.object["accessToken"] as? String)
        #expect(try fixture.server.introspect(accessToken).jkt != nil)
        let renewed = try fixture.json(["token", "--account", "alice", "--force"])
        #expect(renewed.object["tokenType"] as? String == "DPoP" && renewed.object["source"] as? String == "network")
        #expect(renewed.object["accessToken"] == nil, "no token without --reveal")
        #expect(try fixture.refreshGrants() == 1)
        #expect(try fixture.server.counter("dpop_nonce_challenges") == 1, "the refresh process used the login's stored nonce: no 400")
        let text = try fixture.run(["token", "--account", "alice"])
        #expect(text.standardOutput.contains("DPoP"))
    }

    @Test("TOKENCTL_DPOP=1 does what --dpop does; a plain login stays Bearer")
    func environmentVariable() throws {
        let fixture = try Fixture()
        #expect(try Self.loginDPoP(fixture, environment: ["TOKENCTL_DPOP": "1"], flag: false).exitCode == 0)
        #expect(try fixture.json(["token", "--account", "alice"]).object["tokenType"] as? String == "DPoP")
        #expect(try Self.loginDPoP(fixture, account: "bob", flag: false).exitCode == 0)
        #expect(try fixture.json(["token", "--account", "bob"]).object["tokenType"] as? String == "Bearer")
        #expect(try Self.loginDPoP(fixture, account: "carol", environment: ["TOKENCTL_DPOP": "yes"], flag: false).exitCode == 64)
    }

    @Test("a second use_dpop_nonce in a row: non-zero exit, the session still usable; one renewal is one refresh")
    func secondNonceInARow() throws {
        let fixture = try Fixture()
        #expect(try Self.loginDPoP(fixture).exitCode == 0)
        try fixture.server.dpop(["reject_next": 2])
        let refused = try fixture.run(["token", "--account", "alice", "--force"])
        #expect(refused.exitCode != 0)
        #expect(try fixture.refreshGrants() == 0)
        let again = try fixture.json(["token", "--account", "alice", "--force"])
        #expect(again.result.exitCode == 0, "\(again.result.standardError)")
        #expect(again.object["tokenType"] as? String == "DPoP")
        #expect(try fixture.refreshGrants() == 1)
    }

    @Test("proof: the JWT alone on stdout; typ, alg, jwk, htu without query, ath of the current token, r||s signature")
    func proofShape() throws {
        let fixture = try Fixture()
        #expect(try Self.loginDPoP(fixture).exitCode == 0)
        let url = fixture.server.baseURL.absoluteString + "/userinfo?page=2#top"
        let result = try fixture.run(["proof", "--account", "alice", "--method", "GET", "--url", url])
        #expect(result.exitCode == 0, "\(result.standardError)")
        let proof = result.standardOutput.trimmingCharacters(in: .newlines)
        #expect(result.standardOutput == proof + "\n", "the proof alone")
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let header = try Self.decode(parts[0])
        let claims = try Self.decode(parts[1])
        #expect(header["typ"] as? String == "dpop+jwt" && header["alg"] as? String == "ES256")
        let jwk = try #require(header["jwk"] as? [String: Any])
        #expect(jwk["kty"] as? String == "EC" && jwk["crv"] as? String == "P-256" && jwk["d"] == nil)
        #expect(claims["htm"] as? String == "GET")
        #expect(claims["htu"] as? String == fixture.server.baseURL.absoluteString + "/userinfo")
        var signature = String(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while signature.count % 4 != 0 { signature += "=" }
        #expect(Data(base64Encoded: signature)?.count == 64, "raw r||s, not DER")
        let token = try #require(try fixture.json(["token", "--account", "alice", "--reveal"]).object["accessToken"] as? String)
        let verdict = try fixture.server.checkDPoPProof(proof, method: "GET", url: url, accessToken: token)
        #expect(verdict.error == nil, "\(verdict.description ?? "")")
        #expect(claims["ath"] as? String != nil && verdict.claims["ath"] as? String == claims["ath"] as? String)
        #expect(try fixture.server.userinfoStatus(
            authorization: "DPoP " + token,
            dpop: try fixture.run(["proof", "--account", "alice", "--method", "GET", "--url", url]).standardOutput
                .trimmingCharacters(in: .newlines)) == 200)
    }

    @Test("proof --nonce: an API that asks for a nonce gets it in this proof and in the next one without --nonce")
    func proofWithTheAPIsNonce() throws {
        let fixture = try Fixture()
        #expect(try Self.loginDPoP(fixture).exitCode == 0)
        let url = fixture.server.baseURL.absoluteString + "/userinfo"
        let token = try #require(try fixture.json(["token", "--account", "alice", "--reveal"]).object["accessToken"] as? String)
        let nonce = try #require(try fixture.server.dpop(["resource_nonce": true, "rotate_nonce": true])["nonce"] as? String)
        func proof(_ extra: [String]) throws -> String {
            let result = try fixture.run(["proof", "--account", "alice", "--method", "GET", "--url", url] + extra)
            #expect(result.exitCode == 0, "\(result.standardError)")
            return result.standardOutput.trimmingCharacters(in: .newlines)
        }
        let stale = try fixture.server.userinfo(authorization: "DPoP " + token, dpop: try proof([]))
        #expect(stale.status == 401 && stale.dpopNonce == nonce, "the API asks for its nonce")
        let given = try proof(["--nonce", nonce])
        let parts = given.split(separator: ".")
        try #require(parts.count == 3, "not a JWT: \(given)")
        #expect(try Self.decode(parts[1])["nonce"] as? String == nonce)
        #expect(try fixture.server.userinfoStatus(authorization: "DPoP " + token, dpop: given) == 200)
        let kept = try proof([])  // another process: the nonce was kept in the store
        #expect(try fixture.server.userinfoStatus(authorization: "DPoP " + token, dpop: kept) == 200)
    }

    @Test("proof: bad input is refused and changes nothing")
    func proofBadInput() throws {
        let fixture = try Fixture()
        #expect(try Self.loginDPoP(fixture).exitCode == 0)
        #expect(try Self.loginDPoP(fixture, account: "bob", flag: false).exitCode == 0)
        let before = try fixture.server.stats().tokenRequests
        let url = fixture.server.baseURL.absoluteString + "/userinfo"
        let noAccount = try fixture.run(["proof", "--account", "nobody", "--method", "GET", "--url", url])
        #expect(noAccount.exitCode == 1 && noAccount.standardOutput.isEmpty)
        let bearer = try fixture.run(["proof", "--account", "bob", "--method", "GET", "--url", url])
        #expect(bearer.exitCode == 1 && bearer.standardError.contains("DPoP"))
        #expect(try fixture.run(["proof", "--account", "alice", "--method", "GET", "--url", "ftp://example.com/x"]).exitCode == 64)
        #expect(try fixture.run(["proof", "--account", "alice", "--method", "get", "--url", url]).exitCode == 64)
        #expect(try fixture.run(["proof", "--account", "alice", "--url", url]).exitCode == 64)
        #expect(try fixture.run(["proof", "--account", "alice", "--method", "GET"]).exitCode == 64)
        for bad in ["has space", "quote\"", ""] {
            let refused = try fixture.run(["proof", "--account", "alice", "--method", "GET", "--url", url, "--nonce", bad])
            #expect(refused.exitCode == 64 && refused.standardOutput.isEmpty, "--nonce '\(bad)'")
        }
        #expect(try fixture.server.stats().tokenRequests == before, "nothing was asked of the server")
        #expect(try fixture.json(["token", "--account", "bob"]).object["tokenType"] as? String == "Bearer")
    }
}
