import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

@testable import AuthSession

@Suite("PKCE and sign-in random values", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PKCETests {
    /// RFC 7636 Appendix B: the 32 octets, their verifier and its S256 challenge.
    @Test func rfc7636AppendixB() {
        let octets: [UInt8] = [
            116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
            22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
        ]
        let pkce = PKCE(randomBytes: octets)
        #expect(pkce.verifier.stringValue() == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.method == "S256")
        #expect(!"\(pkce.verifier)".contains("dBjf"), "the verifier never prints")
    }

    @Test func freshValuesAreWellFormedAndDistinct() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var seen = Set<String>()
        for _ in 0..<50 {
            let secrets = SignInSecrets()
            let verifier = secrets.pkce.verifier.stringValue() ?? ""
            for value in [verifier, secrets.pkce.challenge, secrets.state, secrets.nonce] {
                #expect(value.count == 43)
                #expect(value.allSatisfy(alphabet.contains))
                #expect(seen.insert(value).inserted, "a random value repeated")
            }
            #expect(secrets.pkce.challenge == PKCE.challenge(forVerifier: verifier))
        }
    }

    @Test func base64URLRoundTripAndStrictness() {
        for length in 0..<70 {
            let bytes = SignInRandom.bytes(length)
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
        #expect(Base64URL.decode("YQ") == Array("a".utf8))
        #expect(Base64URL.decode("YQ==") == nil, "padding is refused")
        #expect(Base64URL.decode("Y") == nil, "an impossible length is refused")
        #expect(Base64URL.decode("YR") == nil, "non-zero unused bits are refused")
        #expect(Base64URL.decode("a+b/") == nil, "the base64 (not url) alphabet is refused")
    }

    @Test func sha256KnownAnswer() {
        // FIPS 180-2 example "abc".
        #expect(
            SHA256Digest.hash(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined()
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
