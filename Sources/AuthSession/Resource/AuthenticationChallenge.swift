import FoundationEssentials

/// One challenge of an API's `WWW-Authenticate` answer (RFC 9110 11.6.1): its scheme and either
/// its auth-params or a token68, for apps that make their own HTTP requests.
/// ``TokenSession/authorizedRequest(_:account:audience:scopes:)`` reads them by itself.
///
/// ```swift
/// let challenges = try AuthenticationChallenge.parse(headerValues: response.headers.values(for: "WWW-Authenticate"))
/// if let bearer = challenges.first(where: \.isBearer), bearer.error == "insufficient_user_authentication" {
///     // sign in again with bearer.acrValues and bearer.maxAge (RFC 9470)
/// }
/// ```
///
/// The parameters are the server's untrusted text: decide on ``error``, never show
/// ``errorDescription`` as the app's own words.
public struct AuthenticationChallenge: Sendable, Equatable, CustomStringConvertible {
    /// The auth-scheme as the server sent it (`Bearer`, `DPoP`, `Basic`…); schemes are
    /// case-insensitive: compare with ``hasScheme(_:)``.
    public let scheme: String
    /// The token68 form (`Negotiate abc==`), or `nil` when the challenge has auth-params.
    public let token68: String?
    /// The auth-params, names in lower case (they are case-insensitive), values with
    /// quoted-string escapes removed, in the order sent. A name occurs once.
    public let parameters: [(name: String, value: String)]

    /// A challenge (as the parser makes them); `parameters` names are lowered here.
    public init(scheme: String, token68: String? = nil, parameters: [(name: String, value: String)] = []) {
        self.scheme = scheme
        self.token68 = token68
        self.parameters = parameters.map { (name: $0.name.lowercased(), value: $0.value) }
    }

    /// Whether the scheme is `scheme`, compared case-insensitively.
    public func hasScheme(_ scheme: String) -> Bool { self.scheme.lowercased() == scheme.lowercased() }
    /// Whether this is a `Bearer` challenge (RFC 6750).
    public var isBearer: Bool { hasScheme("Bearer") }
    /// Whether this is a `DPoP` challenge (RFC 9449 7.1).
    public var isDPoP: Bool { hasScheme("DPoP") }

    /// The value of the auth-param `name` (any case), or `nil`.
    public subscript(parameter name: String) -> String? {
        let lowered = name.lowercased()
        return parameters.first { $0.name == lowered }?.value
    }

    /// `realm`.
    public var realm: String? { self[parameter: "realm"] }
    /// `error` (RFC 6750 3.1): `invalid_request`, `invalid_token`, `insufficient_scope`; RFC 9470's
    /// `insufficient_user_authentication`; RFC 9449's `use_dpop_nonce`, `invalid_dpop_proof`.
    public var error: String? { self[parameter: "error"] }
    /// `error_description`: the server's untrusted text, for a developer.
    public var errorDescription: String? { self[parameter: "error_description"] }
    /// `scope`, split on spaces: the scopes the API needs (RFC 6750 3).
    public var scope: [String] { Self.words(self[parameter: "scope"]) }
    /// `acr_values`, split on spaces: the authentication context classes the API asks for, most
    /// wanted first (RFC 9470 3).
    public var acrValues: [String] { Self.words(self[parameter: "acr_values"]) }
    /// `max_age`: the longest time since the user last authenticated that the API accepts
    /// (RFC 9470 3); `nil` when absent or not a non-negative integer of seconds.
    public var maxAge: Duration? {
        guard let text = self[parameter: "max_age"], !text.isEmpty, text.utf8.count <= 18,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int64(text)
        else { return nil }
        return .seconds(seconds)
    }
    /// `resource_metadata`: where the API's protected resource metadata is (RFC 9728 5.1); `nil`
    /// when absent or not an absolute URL. Not checked here: see
    /// ``TokenSession/authorizedRequest(_:account:audience:scopes:)``.
    public var resourceMetadata: URL? {
        guard let text = self[parameter: "resource_metadata"], let url = URL(string: text), url.scheme != nil else { return nil }
        return url
    }
    /// `algs`, split on spaces: the JWS algorithms the API accepts for DPoP proofs (RFC 9449 7.1).
    public var algorithms: [String] { Self.words(self[parameter: "algs"]) }

    /// `Bearer error="invalid_token", …` — names and the `error` only; other values (which may
    /// carry the server's text) are left out.
    public var description: String {
        var text = scheme
        if token68 != nil { return text + " [token68]" }
        let names = parameters.map { $0.name == "error" ? "error=\"\(TextSanitizer.sanitize($0.value, limit: 64))\"" : $0.name }
        if !names.isEmpty { text += " " + names.joined(separator: ", ") }
        return text
    }

    public static func == (lhs: AuthenticationChallenge, rhs: AuthenticationChallenge) -> Bool {
        lhs.hasScheme(rhs.scheme) && lhs.token68 == rhs.token68 && lhs.parameters.count == rhs.parameters.count
            && zip(lhs.parameters, rhs.parameters).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    private static func words(_ text: String?) -> [String] {
        (text ?? "").split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }
}

extension AuthenticationChallenge {
    /// The most bytes of `WWW-Authenticate` read, all fields together (16 KiB).
    public static let maximumHeaderBytes = 16 * 1024
    /// The most challenges kept from one answer (the rest are ignored).
    public static let maximumChallenges = 32
    /// The most auth-params one challenge may have; a challenge with more is ignored.
    public static let maximumParameters = 32

    /// The challenges of the `WWW-Authenticate` field values `headerValues` (every field of that
    /// name, in order; each may hold several challenges), in order.
    ///
    /// A malformed challenge (a bad quoted-string, a repeated parameter, a parameter before
    /// any scheme, a stray character) is ignored with the parameters that follow it, and
    /// parsing goes on at the next challenge; the others are kept. Never crashes on any input.
    ///
    /// - Throws: ``AuthSessionError`` `unexpectedResponse` when the values are longer than
    ///   ``maximumHeaderBytes`` together: nothing is read from them.
    public static func parse(headerValues: [String]) throws(AuthSessionError) -> [AuthenticationChallenge] {
        var total = 0
        for value in headerValues {
            total += value.utf8.count
            guard total <= maximumHeaderBytes else {
                throw AuthSessionError(
                    .unexpectedResponse,
                    "The WWW-Authenticate header is longer than \(maximumHeaderBytes) bytes; it was not read.")
            }
        }
        var challenges: [AuthenticationChallenge] = []
        for value in headerValues {
            var parser = ChallengeParser(Array(value.utf8))
            challenges += parser.parse()
            if challenges.count >= maximumChallenges { break }
        }
        return Array(challenges.prefix(maximumChallenges))
    }

    /// The challenges of `response`'s `WWW-Authenticate` fields (see ``parse(headerValues:)``).
    /// - Throws: ``AuthSessionError`` `unexpectedResponse` when they are too long.
    public static func parse(_ response: HTTPResponse) throws(AuthSessionError) -> [AuthenticationChallenge] {
        try parse(headerValues: response.headers.values(for: "WWW-Authenticate"))
    }
}
