import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

/// `IDTokenValidator` against tokens signed here with RSA keys made by libcrypto, the key set
/// served from memory. One case per check, the good path, the leeway edges and the key-set cache.
@Suite("ID token validator", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct IDTokenValidatorTests {
    static let key = TestRSAKey()
    static let otherKey = TestRSAKey()
    static let issuer = "http://127.0.0.1:8765/"
    static let clientID = "client-abc"
    static let nonce = "n0nce-0123456789abcdefghijklmnopqrstuvwxyzAB"
    static let subject = "apple|001234.0123456789abcdef0123456789abcdef.1234"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let t = now.timeIntervalSince1970

    static func claims(_ changes: [String: Any?] = [:]) -> [String: Any] {
        var claims: [String: Any] = [
            "iss": issuer, "sub": subject, "aud": clientID, "exp": t + 3600, "iat": t - 5, "nonce": nonce,
            "auth_time": t - 30, "name": "Zoë Example", "email": "zoe@privaterelay.appleid.com", "email_verified": true,
        ]
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    static func rs256(_ claims: [String: Any], kid: String? = "k1", signer: TestRSAKey = key) -> SecretBytes {
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        if let kid { header["kid"] = kid }
        return SecretBytes(utf8: TestToken.make(header: header, claims: claims, sign: signer.sign))
    }

    static func validator(_ transport: KeySetTransport, issuer: String = issuer) -> IDTokenValidator {
        IDTokenValidator(issuer: URL(string: issuer)!, clientID: clientID, transport: transport, now: { now })
    }

    static func standardTransport() -> KeySetTransport { KeySetTransport(keys: [key.jwk(kid: "k1")]) }

    /// Expects validation to fail the `check`, with no token or claim value in the error.
    static func expect(
        _ check: IDTokenCheck, _ token: SecretBytes, nonce: String? = nonce, maxAge: Duration? = nil,
        transport: KeySetTransport = standardTransport(), sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            _ = try await validator(transport).validate(token, nonce: nonce, maxAge: maxAge)
            Issue.record("accepted, expected the \(check) check to fail", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .idTokenInvalid, "\(error)", sourceLocation: sourceLocation)
            #expect(error.idTokenCheck == check, "\(error)", sourceLocation: sourceLocation)
            let text = error.description + error.message
            let tokenText = token.stringValue() ?? ""
            let values = [String(tokenText.prefix(20)), String(tokenText.suffix(20)), subject, "001234", "zoe@", Self.nonce]
            for secret in values where secret.count >= 4 {
                #expect(!text.contains(secret), "the error names a value: \(text)", sourceLocation: sourceLocation)
            }
        }
    }

    static func accept(
        _ token: SecretBytes, nonce: String? = nonce, maxAge: Duration? = nil, transport: KeySetTransport = standardTransport(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> IDTokenClaims? {
        do {
            return try await validator(transport).validate(token, nonce: nonce, maxAge: maxAge)
        } catch {
            Issue.record("refused: \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: - Good path

    @Test func goodTokenGivesTheClaimsAndTheKeySetIsCached() async throws {
        let transport = Self.standardTransport()
        let validator = Self.validator(transport)
        let claims = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce, maxAge: .seconds(300))
        #expect(claims.subject == Self.subject)
        #expect(claims.appleUserID == "001234.0123456789abcdef0123456789abcdef.1234")
        #expect(claims.name == "Zoë Example")
        #expect(claims.email == "zoe@privaterelay.appleid.com")
        #expect(claims.emailVerified == true)
        #expect(claims.expiresAt == Date(timeIntervalSince1970: Self.t + 3600))
        #expect(claims.issuedAt == Date(timeIntervalSince1970: Self.t - 5))
        #expect(!"\(claims)".contains("001234") && !"\(claims)".contains("zoe@"), "\(claims)")
        #expect(transport.requests.map(\.absoluteString) == ["http://127.0.0.1:8765/.well-known/jwks.json"])

        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
        #expect(transport.requests.count == 1, "the key set is cached")
    }

    @Test func optionalClaimsAndOtherIdentities() async throws {
        let linked = await Self.accept(
            Self.rs256(Self.claims(["sub": "auth0|abc", "name": nil, "email": nil, "email_verified": "true"])))
        #expect(linked?.subject == "auth0|abc")
        #expect(linked?.appleUserID == nil, "sub of another identity has no Apple user id")
        #expect(linked?.name == nil && linked?.email == nil)
        #expect(linked?.emailVerified == true, "Apple's string \"true\" is read")
        // One audience in an array needs no azp; no nonce sent means none is compared.
        let plain = await Self.accept(Self.rs256(Self.claims(["aud": [Self.clientID], "nonce": nil])), nonce: nil)
        #expect(plain != nil)
        // Several audiences with azp = client id.
        let several = await Self.accept(Self.rs256(Self.claims(["aud": ["https://api", Self.clientID], "azp": Self.clientID])))
        #expect(several != nil)
        // The issuer URL without a trailing slash is normalised to have one.
        let transport = Self.standardTransport()
        let validator = Self.validator(transport, issuer: "http://127.0.0.1:8765")
        #expect(validator.issuer == Self.issuer)
        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
    }

    // MARK: - Format, algorithm, key, signature

    @Test func malformedTokens() async {
        for text in ["", "abc", "a.b", "a.b.c.d", "!!.e30.", "e30.e30", "bm90IGpzb24.e30.", "e30.W10."] {
            await Self.expect(.format, SecretBytes(utf8: text))
        }
        let critical = TestToken.make(header: ["alg": "RS256", "kid": "k1", "crit": ["exp"]], claims: Self.claims(), sign: Self.key.sign)
        await Self.expect(.format, SecretBytes(utf8: critical))
    }

    @Test func algorithmNoneAndHS256AreRefused() async {
        let none = TestToken.make(header: ["alg": "none", "kid": "k1"], claims: Self.claims(), sign: { _ in [] })
        await Self.expect(.algorithm, SecretBytes(utf8: none))
        let lowercase = TestToken.make(header: ["alg": "rs256", "kid": "k1"], claims: Self.claims(), sign: Self.key.sign)
        await Self.expect(.algorithm, SecretBytes(utf8: lowercase))
        // Algorithm confusion: HS256 keyed with the public key's own bytes.
        for secret in [Self.key.modulus, Array(TestToken.json(Self.key.jwk(kid: "k1")))] {
            let hs256 = TestToken.make(
                header: ["alg": "HS256", "kid": "k1"], claims: Self.claims(), sign: { hmacSHA256(key: secret, $0) })
            await Self.expect(.algorithm, SecretBytes(utf8: hs256))
        }
        let ps256 = TestToken.make(header: ["alg": "PS256", "kid": "k1"], claims: Self.claims(), sign: Self.key.sign)
        await Self.expect(.algorithm, SecretBytes(utf8: ps256))
        let missing = TestToken.make(header: ["kid": "k1"], claims: Self.claims(), sign: Self.key.sign)
        await Self.expect(.algorithm, SecretBytes(utf8: missing))
    }

    @Test func unknownKeyIDIsFetchedAgainOnceThenRefused() async throws {
        await Self.expect(.keyID, Self.rs256(Self.claims(), kid: nil))
        await Self.expect(.keyID, Self.rs256(Self.claims(), kid: ""))

        let transport = Self.standardTransport()
        let validator = Self.validator(transport)
        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
        #expect(transport.requests.count == 1)
        do {
            _ = try await validator.validate(Self.rs256(Self.claims(), kid: "unknown"), nonce: Self.nonce)
            Issue.record("accepted a token with an unknown kid")
        } catch {
            #expect(error.idTokenCheck == .keyID)
        }
        #expect(transport.requests.count == 2, "one refetch for the unknown kid, no more")
    }

    @Test func aRotatedKeyIsFoundByTheRefetch() async throws {
        let transport = KeySetTransport([
            .document(["keys": [Self.key.jwk(kid: "k1")]]),
            .document(["keys": [Self.key.jwk(kid: "k1"), Self.otherKey.jwk(kid: "k2")]]),
        ])
        let validator = Self.validator(transport)
        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
        let claims = try await validator.validate(Self.rs256(Self.claims(), kid: "k2", signer: Self.otherKey), nonce: Self.nonce)
        #expect(claims.subject == Self.subject)
        _ = try await validator.validate(Self.rs256(Self.claims(), kid: "k2", signer: Self.otherKey), nonce: Self.nonce)
        #expect(transport.requests.count == 2)
    }

    /// Security review 2, N9: the key set expires. A key the tenant removed stops verifying once
    /// the cached set is older than 6 hours (it was trusted for the life of the process).
    @Test func aRemovedKeyStopsVerifyingWhenTheCachedSetExpires() async throws {
        let clock = TestClock(Self.now)
        let transport = KeySetTransport([
            .document(["keys": [Self.key.jwk(kid: "k1")]]),
            .document(["keys": [Self.otherKey.jwk(kid: "k2")]]),
        ])
        let validator = IDTokenValidator(
            issuer: URL(string: Self.issuer)!, clientID: Self.clientID, transport: transport, now: { clock.now })
        func token() -> SecretBytes { Self.rs256(Self.claims(["iat": clock.now.timeIntervalSince1970, "exp": clock.now.timeIntervalSince1970 + 600])) }
        _ = try await validator.validate(token(), nonce: Self.nonce)
        clock.advance(by: 6 * 3600 - 1)
        _ = try await validator.validate(token(), nonce: Self.nonce)
        #expect(transport.requests.count == 1, "a set younger than 6 hours is used as it is")
        clock.advance(by: 2)
        do {
            _ = try await validator.validate(token(), nonce: Self.nonce)
            Issue.record("a key removed from the tenant's set still verified after the cache expired")
        } catch {
            #expect(error.idTokenCheck == .keyID, "\(error)")
        }
        #expect(transport.requests.count == 2, "the expired set was fetched again once")
    }

    /// Security review 2, N9: unknown `kid`s cause at most one fetch a minute, however many
    /// tokens carry them; after the minute, one more.
    @Test func unknownKeyIDsRefetchAtMostOnceAMinute() async throws {
        let clock = TestClock(Self.now)
        let transport = Self.standardTransport()
        let validator = IDTokenValidator(
            issuer: URL(string: Self.issuer)!, clientID: Self.clientID, transport: transport, now: { clock.now })
        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
        for attempt in 0..<20 {
            do {
                _ = try await validator.validate(Self.rs256(Self.claims(), kid: "made-up-\(attempt)"), nonce: Self.nonce)
                Issue.record("accepted a token with an unknown kid")
            } catch {
                #expect(error.idTokenCheck == .keyID)
            }
            clock.advance(by: 2)
        }
        #expect(transport.requests.count == 2, "20 unknown kids within 40 s: one refetch, got \(transport.requests.count - 1)")
        clock.advance(by: 60)
        _ = try? await validator.validate(Self.rs256(Self.claims(), kid: "made-up-late"), nonce: Self.nonce)
        #expect(transport.requests.count == 3, "a minute later an unknown kid may refetch once more")
        // The known key still verifies without a request.
        _ = try await validator.validate(Self.rs256(Self.claims()), nonce: Self.nonce)
        #expect(transport.requests.count == 3)
    }

    @Test func unusableKeysAreRefused() async {
        for jwk in [
            Self.key.jwk(kid: "k1", kty: "EC"), Self.key.jwk(kid: "k1", alg: "RS512"), Self.key.jwk(kid: "k1", use: "enc"),
            Self.key.jwk(kid: "k1").merging(["n": "not*base64"]) { $1 }, Self.key.jwk(kid: "k1").filter { $0.key != "e" },
        ] {
            await Self.expect(.signingKey, Self.rs256(Self.claims()), transport: KeySetTransport(keys: [jwk]))
        }
        let small = TestRSAKey(bits: 1024)
        await Self.expect(
            .signingKey, Self.rs256(Self.claims(), signer: small), transport: KeySetTransport(keys: [small.jwk(kid: "k1")]))
        // alg and use may be absent.
        _ = await Self.accept(Self.rs256(Self.claims()), transport: KeySetTransport(keys: [Self.key.jwk(kid: "k1", alg: nil, use: nil)]))
    }

    /// The key rules the Wycheproof vectors found missing (WycheproofTests: a key whose `key_ops`
    /// say `encrypt`, a public exponent of 1, a ROCA modulus were trusted): each refused as `signingKey`.
    @Test func keyOperationsExponentAndROCAFingerprintAreChecked() async {
        let jwk = Self.key.jwk(kid: "k1")
        for changes in [["key_ops": ["encrypt"]], ["key_ops": "verify"], ["e": "AQ"], ["e": "Ag"], ["e": "AAAB"], ["e": "AQAA"]] as [[String: Any]] {
            await Self.expect(.signingKey, Self.rs256(Self.claims()), transport: KeySetTransport(keys: [jwk.merging(changes) { $1 }]))
        }
        _ = await Self.accept(Self.rs256(Self.claims()), transport: KeySetTransport(keys: [jwk.merging(["key_ops": ["verify"]]) { $1 }]))
        #expect(JSONWebKey.isUsableExponent([0x00, 0x03]) && JSONWebKey.isUsableExponent([0x01, 0x00, 0x01]))
        #expect(!JSONWebKey.isUsableExponent([]) && !JSONWebKey.isUsableExponent([0x00, 0x01]))
        // The subgroups are the ROCA detector's published markers (crocs-muni/roca), primes 3 to 61.
        let markers: [UInt64] = [
            6, 30, 126, 1026, 5658, 107286, 199410, 8388606, 536870910, 2147483646, 67109890, 2199023255550, 8796093022206,
            140737488355326, 5310023542746834, 576460752303423486, 1455791217086302986,
        ]
        for (members, marker) in zip(ROCAFingerprint.subgroups, markers) {
            #expect(members.indices.filter { members[$0] }.reduce(UInt64(0)) { $0 | 1 << UInt64($1) } == marker)
        }
        #expect(ROCAFingerprint.matches(modulus: [0x01, 0x00, 0x01]), "65537 itself is in every subgroup")
        #expect(!ROCAFingerprint.matches(modulus: [0x02]) && !ROCAFingerprint.matches(modulus: Self.key.modulus))
        #expect(!ROCAFingerprint.matches(modulus: Self.otherKey.modulus))
    }

    @Test func badSignaturesAreRefused() async {
        // Signed by another key under the tenant key's kid.
        await Self.expect(.signature, Self.rs256(Self.claims(), signer: Self.otherKey))
        // Claims changed after signing.
        let genuine = Self.rs256(Self.claims()).stringValue()!
        let parts = genuine.split(separator: ".").map(String.init)
        let forged = parts[0] + "." + Base64URL.encode(TestToken.json(Self.claims(["sub": "apple|someone.else"]))) + "." + parts[2]
        await Self.expect(.signature, SecretBytes(utf8: forged))
        // No signature at all.
        await Self.expect(.signature, SecretBytes(utf8: parts[0] + "." + parts[1] + "."))
    }

    // MARK: - Claims

    @Test func issuerSubjectAudienceAndAuthorizedParty() async {
        await Self.expect(.issuer, Self.rs256(Self.claims(["iss": "http://127.0.0.1:8765"])))
        await Self.expect(.issuer, Self.rs256(Self.claims(["iss": "https://evil.example/"])))
        await Self.expect(.issuer, Self.rs256(Self.claims(["iss": nil])))
        await Self.expect(.subject, Self.rs256(Self.claims(["sub": nil])))
        await Self.expect(.subject, Self.rs256(Self.claims(["sub": ""])))
        await Self.expect(.subject, Self.rs256(Self.claims(["sub": 42])))
        await Self.expect(.audience, Self.rs256(Self.claims(["aud": "other-client"])))
        await Self.expect(.audience, Self.rs256(Self.claims(["aud": ["a", "b"]])))
        await Self.expect(.audience, Self.rs256(Self.claims(["aud": []])))
        await Self.expect(.audience, Self.rs256(Self.claims(["aud": nil])))
        await Self.expect(.authorizedParty, Self.rs256(Self.claims(["aud": [Self.clientID, "https://api"]])))
        await Self.expect(
            .authorizedParty, Self.rs256(Self.claims(["aud": [Self.clientID, "https://api"], "azp": "other-client"])))
    }

    @Test func expirationHasARealSixtySecondLeeway() async {
        _ = await Self.accept(Self.rs256(Self.claims(["exp": Self.t - 59])))
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": Self.t - 60])))
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": Self.t - 61])))
        // Auth0.swift's 60_000 read as seconds would accept a token expired 16 hours ago.
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": Self.t - 16 * 3600])))
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": nil])))
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": "1800003600"])))
        await Self.expect(.expiration, Self.rs256(Self.claims(["exp": true])))
    }

    /// Security review 2, N9: `iat` is compared with the clock (OIDC Core 3.1.3.7); a token
    /// "issued" in the future beyond the leeway is refused (it was accepted, as Auth0.swift does).
    @Test func issuedAtMustBePresentAndNotInTheFuture() async {
        await Self.expect(.issuedAt, Self.rs256(Self.claims(["iat": nil])))
        await Self.expect(.issuedAt, Self.rs256(Self.claims(["iat": Self.t + 600])))
        await Self.expect(.issuedAt, Self.rs256(Self.claims(["iat": Self.t + 61])))
        _ = await Self.accept(Self.rs256(Self.claims(["iat": Self.t + 60])))
        _ = await Self.accept(Self.rs256(Self.claims(["iat": Self.t - 86_400])))
    }

    /// Security review 2, N9: `azp` is checked whenever it is present, also with one audience.
    @Test func authorizedPartyIsCheckedWheneverPresent() async {
        await Self.expect(.authorizedParty, Self.rs256(Self.claims(["azp": "other-client"])))
        await Self.expect(.authorizedParty, Self.rs256(Self.claims(["aud": [Self.clientID], "azp": "other-client"])))
        await Self.expect(.authorizedParty, Self.rs256(Self.claims(["azp": 42])))
        _ = await Self.accept(Self.rs256(Self.claims(["azp": Self.clientID])))
        _ = await Self.accept(Self.rs256(Self.claims(["aud": [Self.clientID, "https://api"], "azp": Self.clientID])))
    }

    @Test func nonceMustMatchTheOneSent() async {
        await Self.expect(.nonce, Self.rs256(Self.claims(["nonce": "another-nonce"])))
        await Self.expect(.nonce, Self.rs256(Self.claims(["nonce": String(Self.nonce.dropLast())])))
        await Self.expect(.nonce, Self.rs256(Self.claims(["nonce": nil])))
    }

    @Test func authTimeIsCheckedAgainstMaxAgeWithTheLeeway() async {
        let maxAge = Duration.seconds(300)
        _ = await Self.accept(Self.rs256(Self.claims(["auth_time": Self.t - 300 - 60])), maxAge: maxAge)
        await Self.expect(.authenticationTime, Self.rs256(Self.claims(["auth_time": Self.t - 300 - 61])), maxAge: maxAge)
        await Self.expect(.authenticationTime, Self.rs256(Self.claims(["auth_time": nil])), maxAge: maxAge)
        // Without max_age, auth_time is not compared.
        _ = await Self.accept(Self.rs256(Self.claims(["auth_time": Self.t - 86_400])))
        _ = await Self.accept(Self.rs256(Self.claims(["auth_time": nil])))
    }

    @Test func acrMustBeOneOfTheAcrValuesSent() async throws {
        let asked = ["urn:example:mfa", "urn:example:pwd"]
        let validator = Self.validator(Self.standardTransport())
        for acr in asked {
            let token = Self.rs256(Self.claims(["acr": acr]))
            _ = try await validator.validate(token, nonce: Self.nonce, acrValues: asked)
        }
        for claims in [Self.claims(["acr": "urn:example:weak"]), Self.claims(["acr": nil]), Self.claims(["acr": 2])] {
            do {
                _ = try await validator.validate(Self.rs256(claims), nonce: Self.nonce, acrValues: asked)
                Issue.record("accepted an acr that was not asked for")
            } catch {
                #expect(error.code == .idTokenInvalid && error.idTokenCheck == .authenticationContext, "\(error)")
                #expect(!error.message.contains("weak"), "the error names the claim's value")
            }
        }
        // Without acr_values, acr is not compared.
        _ = await Self.accept(Self.rs256(Self.claims(["acr": "urn:example:weak"])))
    }

    @Test func theFirstFailedCheckWins() async {
        // Wrong issuer and expired: the issuer check comes first.
        await Self.expect(.issuer, Self.rs256(Self.claims(["iss": "https://evil.example/", "exp": Self.t - 3600])))
        // Wrong audience and wrong nonce: audience first.
        await Self.expect(.audience, Self.rs256(Self.claims(["aud": "x", "nonce": "y"])))
    }

    // MARK: - Key-set failures

    @Test func keySetFetchFailuresKeepTheirOwnCodes() async {
        let token = Self.rs256(Self.claims())
        let cases: [(KeySetTransport.Answer, AuthSessionError.Code)] = [
            (.failure(.notConnected), .notConnectedToInternet),
            (.failure(.timedOut), .timedOut),
            (.status(503, "unavailable"), .serverError),
            (.status(404, "not found"), .unexpectedResponse),
            (.status(200, "not json"), .unexpectedResponse),
            (.document(["keys": "none"]), .unexpectedResponse),
        ]
        for (answer, code) in cases {
            do {
                _ = try await Self.validator(KeySetTransport([answer])).validate(token, nonce: Self.nonce)
                Issue.record("accepted without a key set")
            } catch {
                #expect(error.code == code, "\(error)")
            }
        }
    }
}

/// A clock the test moves by hand.
final class TestClock: @unchecked Sendable {  // `current` under `lock`
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date) { current = start }

    var now: Date { lock.withLock { current } }

    func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}
