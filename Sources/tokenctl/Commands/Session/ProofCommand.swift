import AuthSession
import FoundationEssentials
import TokenStore

/// `tokenctl proof`: prints a DPoP proof (RFC 9449) for one request of a DPoP-bound account
/// to its API: `ath` is the hash of the account's current access token (renewed first when
/// needed), signed by the store's DPoP key.
struct ProofCommand: TokenctlCommand {
    static let method = OptionSpec.value(
        "method", "method", required: true, "The request's HTTP method, in capitals (GET, POST...).")
    static let url = OptionSpec.value(
        "url", "url", required: true, rule: .httpURL, "The request's URL (htu: without its query and fragment).")
    static let nonce = OptionSpec.value(
        "nonce", "nonce", rule: .opaque,
        "The API's DPoP-Nonce (from its 401 use_dpop_nonce answer): kept for the URL's origin, so this proof and later ones carry it.")

    static let spec = CommandSpec(
        "proof",
        abstract: "Print a DPoP proof for a request to the API with the account's access token.",
        discussion: """
            For a session signed in with 'login --dpop'. Prints the proof JWT alone on stdout \
            (typ dpop+jwt, alg ES256, the public jwk; htm, htu, a fresh jti, iat, and ath: \
            the base64url SHA-256 of the account's current access token, renewed first when \
            needed). Send it as the DPoP header with 'Authorization: DPoP <token>' \
            ('tokenctl token --reveal'). An account that is not DPoP-bound exits 1 and \
            nothing changes.
            """,
        options: [
            ServerOptions.domain, ServerOptions.issuer, ServerOptions.clientID, ItemOptions.account, TokenCommand.audience,
            ServerOptions.scope, method, url, nonce,
        ])

    let server: ServerOptions
    let account: String
    let audience: String?
    let scopes: [String]
    let method: String
    let url: URL
    let nonce: String?

    init(parsed: ParsedCommand) throws {
        server = try ServerOptions(parsed)
        account = try parsed.requiredValue(ItemOptions.account)
        audience = parsed.value(TokenCommand.audience)
        scopes = ServerOptions.scopes(parsed, default: [])
        let method = try parsed.requiredValue(Self.method)
        guard method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            throw UsageError(
                kind: .invalidValue(option: Self.method.synopsis, environmentVariable: nil, expectation: "an HTTP method in capitals"),
                commandName: parsed.name)
        }
        self.method = method
        // The parser checked it is an http(s) URL with a host.
        url = URL(string: try parsed.requiredValue(Self.url))!
        nonce = parsed.value(Self.nonce)
        if let nonce, !TokenSession.isDPoPNonce(nonce) {
            throw UsageError(
                kind: .invalidValue(
                    option: Self.nonce.synopsis, environmentVariable: nil,
                    expectation: "a DPoP nonce (1 to 1024 printable characters, no space, quote or backslash)"),
                commandName: parsed.name)
        }
    }

    func run(_ context: CommandContext) async throws -> ExitCode {
        let session = try server.openSession(context).session
        let account = AccountID(account)
        guard try session.canRenew(account: account) else {
            throw AuthSessionError(.interactionRequired, "No refresh token is stored for the account; the user must sign in.")
        }
        guard try await session.isDPoPBound(account: account) else {
            throw CommandFailure(
                .failure, "the account's session is not DPoP-bound (Bearer tokens need no proof)",
                hint: "sign in with 'tokenctl login --dpop'")
        }
        if let nonce { try await session.recordDPoPNonce(nonce, for: url) }
        let token = try await session.accessToken(for: account, audience: audience, scopes: scopes)
        let proof = try await session.dpopProof(method: method, url: url, accessToken: token)
        context.emit(.object(["proof": .string(proof)])) { proof + "\n" }
        return .ok
    }
}
