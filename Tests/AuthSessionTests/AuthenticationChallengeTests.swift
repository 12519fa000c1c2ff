import Foundation
import TestSupport
import TestTraits
import Testing

@testable import AuthSession

/// `WWW-Authenticate` (RFC 9110 11.6.1) as an app's API answers: the RFCs' own examples, odd
/// spacing, escapes, several challenges in one field and in several fields, and malformed or
/// hostile input (ignored challenge by challenge, a typed error over the size limit).
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct AuthenticationChallengeTests {
    /// One case: the field values and the challenges expected, each as scheme, token68 and
    /// (name, value) pairs.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let values: [String]
        let expected: [(String, String?, [(String, String)])]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // RFC 6750 3
        Case(name: "RFC 6750 3 realm", values: [#"Bearer realm="example""#], expected: [("Bearer", nil, [("realm", "example")])]),
        Case(
            name: "RFC 6750 3 invalid_token",
            values: [#"Bearer realm="example", error="invalid_token", error_description="The access token expired""#],
            expected: [
                ("Bearer", nil, [("realm", "example"), ("error", "invalid_token"), ("error_description", "The access token expired")])
            ]),
        // RFC 9110 11.6.1: two challenges in one field, a token value, an escaped quote.
        Case(
            name: "RFC 9110 Newauth and Basic",
            values: [#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#],
            expected: [
                ("Newauth", nil, [("realm", "apps"), ("type", "1"), ("title", #"Login to "apps""#)]),
                ("Basic", nil, [("realm", "simple")]),
            ]),
        // RFC 9470 3
        Case(
            name: "RFC 9470 acr_values",
            values: [
                #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR""#
            ],
            expected: [
                ("Bearer", nil, [
                    ("error", "insufficient_user_authentication"),
                    ("error_description", "A different authentication level is required"), ("acr_values", "myACR"),
                ])
            ]),
        Case(
            name: "RFC 9470 max_age",
            values: [
                #"Bearer error="insufficient_user_authentication", error_description="More recent authentication is required", max_age="5""#
            ],
            expected: [
                ("Bearer", nil, [
                    ("error", "insufficient_user_authentication"),
                    ("error_description", "More recent authentication is required"), ("max_age", "5"),
                ])
            ]),
        // RFC 9449 7.1 and 9
        Case(
            name: "RFC 9449 DPoP and Bearer fields",
            values: [#"DPoP error="invalid_token", error_description="Invalid DPoP key binding", algs="ES256""#, #"Bearer realm="x""#],
            expected: [
                ("DPoP", nil, [("error", "invalid_token"), ("error_description", "Invalid DPoP key binding"), ("algs", "ES256")]),
                ("Bearer", nil, [("realm", "x")]),
            ]),
        Case(
            name: "RFC 9449 use_dpop_nonce",
            values: [#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#],
            expected: [
                ("DPoP", nil, [("error", "use_dpop_nonce"), ("error_description", "Resource server requires nonce in DPoP proof")])
            ]),
        // RFC 9728 5.1
        Case(
            name: "RFC 9728 resource_metadata",
            values: [#"Bearer resource_metadata="https://resource.example.com/.well-known/oauth-protected-resource""#],
            expected: [("Bearer", nil, [("resource_metadata", "https://resource.example.com/.well-known/oauth-protected-resource")])]),
        // Spacing, case, empty elements, tokens for values.
        Case(
            name: "odd spacing and empty list elements",
            values: [" ,, Bearer \t realm = \"a b\" ,  ,ERROR=invalid_token ,\tDPoP   algs=\"ES256 PS256\" ,, "],
            expected: [("Bearer", nil, [("realm", "a b"), ("error", "invalid_token")]), ("DPoP", nil, [("algs", "ES256 PS256")])]),
        Case(
            name: "quoted-pair escapes",
            values: [#"Bearer error_description="a\\b \"c\" \d", realm="""#],
            expected: [("Bearer", nil, [("error_description", #"a\b "c" d"#), ("realm", "")])]),
        Case(name: "scheme alone", values: ["Bearer"], expected: [("Bearer", nil, [])]),
        Case(name: "schemes alone", values: ["Basic, Bearer ,DPoP"], expected: [("Basic", nil, []), ("Bearer", nil, []), ("DPoP", nil, [])]),
        Case(
            name: "token68 then a challenge",
            values: ["Negotiate dGVzdA==, Bearer realm=api"],
            expected: [("Negotiate", "dGVzdA==", []), ("Bearer", nil, [("realm", "api")])]),
        Case(name: "token68 with slashes", values: ["Basic a+b/c-d._~e="], expected: [("Basic", "a+b/c-d._~e=", [])]),
        Case(name: "non-ASCII UTF-8 in a quoted-string", values: ["Bearer realm=\"café\""], expected: [("Bearer", nil, [("realm", "café")])]),
        // Malformed parts are dropped; the rest is kept.
        Case(
            name: "unterminated quote drops only its challenge",
            values: [#"Basic realm="ok", Bearer error="invalid_token"#],
            expected: [("Basic", nil, [("realm", "ok")])]),
        Case(
            name: "repeated parameter drops its challenge",
            values: [#"Bearer error="a", error="b", realm="x", DPoP algs="ES256""#],
            expected: [("DPoP", nil, [("algs", "ES256")])]),
        Case(
            name: "parameter before any scheme",
            values: [#"realm="x", Bearer error="invalid_token""#],
            expected: [("Bearer", nil, [("error", "invalid_token")])]),
        Case(
            name: "control character in a quoted-string",
            values: ["Bearer realm=\"a\u{01}b\", DPoP algs=ES256"],
            expected: [("DPoP", nil, [("algs", "ES256")])]),
        Case(
            name: "garbage after a value",
            values: [#"Bearer error="x" y, DPoP algs=ES256"#],
            expected: [("DPoP", nil, [("algs", "ES256")])]),
        Case(name: "parameter after a token68", values: ["Basic abc, realm=x"], expected: []),
        Case(name: "a scheme glued to a quote", values: [#"Bearer"x", DPoP"#], expected: [("DPoP", nil, [])]),
        Case(name: "empty value", values: ["Bearer error=invalid_token, realm=, DPoP"], expected: [("DPoP", nil, [])]),
        // The grammar's own ambiguity: a lone `name=` after the scheme is a token68.
        Case(name: "token68 that looks like a name", values: ["Bearer realm=, DPoP"], expected: [("Bearer", "realm=", []), ("DPoP", nil, [])]),
        Case(name: "nothing", values: ["", " , ", "\""], expected: []),
        Case(name: "a field of garbage, then a good one", values: ["\"\\\u{7F}\u{00}==", "Bearer realm=a"], expected: [("Bearer", nil, [("realm", "a")])]),
    ]

    @Test(arguments: cases) func parses(_ testCase: Case) throws {
        let challenges = try AuthenticationChallenge.parse(headerValues: testCase.values)
        let expected = testCase.expected.map {
            AuthenticationChallenge(scheme: $0.0, token68: $0.1, parameters: $0.2.map { (name: $0.0, value: $0.1) })
        }
        #expect(challenges == expected, "\(challenges)")
    }

    @Test func namedParameters() throws {
        let header = #"Bearer error="insufficient_user_authentication", acr_values="urn:a  urn:b", max_age=300, "#
            + #"scope="read write", resource_metadata="https://api.example/.well-known/oauth-protected-resource", "#
            + #"realm=r, algs="ES256 RS256", error_description="Step up""#
        let challenge = try #require(try AuthenticationChallenge.parse(headerValues: [header]).first)
        #expect(challenge.isBearer && !challenge.isDPoP && challenge.hasScheme("bEaReR"))
        #expect(challenge.error == "insufficient_user_authentication")
        #expect(challenge.errorDescription == "Step up")
        #expect(challenge.acrValues == ["urn:a", "urn:b"])
        #expect(challenge.maxAge == .seconds(300))
        #expect(challenge.scope == ["read", "write"])
        #expect(challenge.resourceMetadata == URL(string: "https://api.example/.well-known/oauth-protected-resource"))
        #expect(challenge.realm == "r")
        #expect(challenge.algorithms == ["ES256", "RS256"])
        #expect(challenge[parameter: "MAX_AGE"] == "300")
    }

    @Test(arguments: [("0", Duration?.some(.zero)), ("5", .seconds(5)), ("-1", nil), ("1.5", nil), ("", nil), (" 5", nil),
        ("99999999999999999999", nil), ("abc", nil)])
    func maxAgeIsANonNegativeInteger(value: String, expected: Duration?) throws {
        let challenge = try #require(try AuthenticationChallenge.parse(headerValues: ["Bearer max_age=\"\(value)\""]).first)
        #expect(challenge.maxAge == expected)
    }

    @Test func relativeResourceMetadataIsNone() throws {
        let challenge = try #require(try AuthenticationChallenge.parse(headerValues: [#"Bearer resource_metadata="/x""#]).first)
        #expect(challenge.resourceMetadata == nil)
    }

    @Test func oversizeHeaderIsATypedError() {
        let big = "Bearer realm=\"" + String(repeating: "a", count: AuthenticationChallenge.maximumHeaderBytes) + "\""
        #expect(throws: AuthSessionError.unexpectedResponse) { try AuthenticationChallenge.parse(headerValues: [big]) }
        // Split over several fields, the total counts.
        let half = String(repeating: "b", count: AuthenticationChallenge.maximumHeaderBytes / 2 + 1)
        #expect(throws: AuthSessionError.unexpectedResponse) {
            try AuthenticationChallenge.parse(headerValues: ["Basic " + half, "Basic " + half])
        }
        // Right at the limit it is read.
        let fits = "Bearer realm=" + String(repeating: "c", count: AuthenticationChallenge.maximumHeaderBytes - 13)
        #expect((try? AuthenticationChallenge.parse(headerValues: [fits]))?.first?.realm?.count == AuthenticationChallenge.maximumHeaderBytes - 13)
    }

    @Test func countsAreBounded() throws {
        let many = (0..<100).map { "S\($0)" }.joined(separator: ", ")
        #expect(try AuthenticationChallenge.parse(headerValues: [many]).count == AuthenticationChallenge.maximumChallenges)
        let parameters = (0...AuthenticationChallenge.maximumParameters).map { "p\($0)=v" }.joined(separator: ", ")
        #expect(try AuthenticationChallenge.parse(headerValues: ["Bearer " + parameters + ", DPoP"]).map(\.scheme) == ["DPoP"])
        let fitting = (0..<AuthenticationChallenge.maximumParameters).map { "p\($0)=v" }.joined(separator: ", ")
        #expect(try AuthenticationChallenge.parse(headerValues: ["Bearer " + fitting]).first?.parameters.count == AuthenticationChallenge.maximumParameters)
    }

    @Test func readsAResponse() throws {
        var headers = HTTPHeaders()
        headers.add(name: "WWW-Authenticate", value: #"DPoP error="use_dpop_nonce""#)
        headers.add(name: "www-authenticate", value: "Bearer")
        let challenges = try AuthenticationChallenge.parse(HTTPResponse(status: 401, headers: headers))
        #expect(challenges.map(\.scheme) == ["DPoP", "Bearer"])
        #expect(challenges.first?.error == "use_dpop_nonce")
    }

    @Test func descriptionShowsNamesNotValues() throws {
        let challenge = try #require(
            try AuthenticationChallenge.parse(headerValues: [#"Bearer error="invalid_token", error_description="secret-ish text""#]).first)
        #expect(challenge.description == #"Bearer error="invalid_token", error_description"#)
        #expect(try AuthenticationChallenge.parse(headerValues: ["Basic c2VjcmV0"]).first?.description == "Basic [token68]")
    }

    /// Random bytes (printable-heavy, with the grammar's punctuation) never crash the parser,
    /// and every challenge it keeps has a token scheme and unique lower-case names.
    @Test func randomInputKeepsTheInvariants() throws {
        var generator = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &generator)
        var random = SeededGenerator(seed: seed)
        let alphabet = Array(#"Bearer DPoP realm=error",\= \t"abc"#.utf8) + [0, 0x7F, 0xC3, 0xA9, 0xFF]
        var kept = 0
        for _ in 0..<20_000 {
            let length = Int(random.next() % 64)
            let bytes = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            let value = String(decoding: bytes, as: UTF8.self)
            for challenge in try AuthenticationChallenge.parse(headerValues: [value]) {
                kept += 1
                #expect(!challenge.scheme.isEmpty && challenge.scheme.utf8.allSatisfy(ChallengeParser.isTokenCharacter))
                let names = challenge.parameters.map(\.name)
                #expect(Set(names).count == names.count && names.allSatisfy { $0 == $0.lowercased() })
            }
        }
        print("METRIC challenge_parser_random SEED=\(seed) inputs=20000 challenges_kept=\(kept) crashes=0")
    }
}
