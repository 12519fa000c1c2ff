// `make demo`: one sign-in → use → logout cycle, printed step by step.
//
// Runs inside a private keyring session (scripts/with-keyring) against the local test
// authorization server, whose URL comes in TOKENSTORE_DEMO_SERVER (scripts/demo starts it).
// The sign-in goes through the browser named by $BROWSER (scripts/demo picks a headless
// Chromium or the scripted user agent). Tokens are never printed: only fingerprints,
// lengths and outcomes; the user id and email only shortened.
import AuthSession
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TokenStore

func step(_ text: String) { print("\n== \(text)") }
func show(_ text: String) { print("   \(text)") }

guard let serverURL = ProcessInfo.processInfo.environment["TOKENSTORE_DEMO_SERVER"].flatMap(URL.init(string:)) else {
    FileHandle.standardError.write(Data("tokenstore-demo: set TOKENSTORE_DEMO_SERVER (run `make demo`)\n".utf8))
    exit(64)
}

/// Calls one of the test server's control paths (the demo's stand-in for Apple and for outages).
func control(_ path: String, _ body: [String: Any]) async throws -> [String: Any] {
    var request = URLRequest(url: serverURL.appendingPathComponent("__test/\(path)"))
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = try JSONSerialization.data(withJSONObject: body)
    let (data, _) = try await URLSession.shared.data(for: request)
    return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
}

let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tokenstore-demo-\(getpid())")
defer { try? FileManager.default.removeItem(at: directory) }  // a demo's scratch directory
let storePath = directory.appendingPathComponent("store/tokens.sqlite").path
let account: AccountID = "demo@example.com"
let appleUserID = "001234.\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()).0042"
let userName = "Jane Appleseed"
let userEmail = "jane.demo@privaterelay.appleid.com"

/// The first 6 characters and an ellipsis: enough to tell ids apart on screen. A `sub`
/// keeps its provider (`apple|001234…`), an email its domain (`j…@privaterelay.appleid.com`).
func shortened(_ text: String?) -> String {
    guard let text else { return "none" }
    if let bar = text.firstIndex(of: "|") { return text[...bar] + shortened(String(text[text.index(after: bar)...])) }
    if let at = text.firstIndex(of: "@") { return "\(text.prefix(1))…\(text[at...])" }
    return "\(text.prefix(6))…"
}

/// The loopback port of the authorization URL's `redirect_uri`, recorded once the sign-in
/// built the URL (the URL itself is not printed: it carries the attempt's state and nonce).
final class RedirectPort: @unchecked Sendable {  // `port` is guarded by `lock`
    private let lock = NSLock()
    private var port: Int?
    var value: Int? { lock.withLock { port } }

    func record(_ authorizationURL: URL) {
        let redirect = URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)?
            .queryItems?.first { $0.name == "redirect_uri" }?.value
        lock.withLock { port = redirect.flatMap(URLComponents.init(string:))?.port }
    }
}

do {
    step("Open a store (data key in the Secret Service, rows sealed in SQLite)")
    let store = try TokenStore(path: storePath, appID: "dev.tokenstore.demo")
    show("store \(store.storeIdentifier.prefix(8))…, key \(store.keyIdentifier.prefix(8))… in the private gnome-keyring")
    let policy = RetryPolicy(maximumAttempts: 3, baseDelay: .milliseconds(100), maximumDelay: .milliseconds(400))
    let session = TokenSession(
        store: store, configuration: try AuthorizationServerConfiguration(domain: serverURL, clientID: "tokenstore-test"),
        retryPolicy: policy)

    step("Sign in with Apple through the browser (loopback redirect + PKCE, RFC 8252)")
    // The test server plays Apple: this user signs in next, for the first time (name and email sent once).
    _ = try await control(
        "oidc/next_user", ["apple_id": appleUserID, "name": userName, "email": userEmail, "first_sign_in": true])
    let browserName = ProcessInfo.processInfo.environment["BROWSER"].map { _ in "$BROWSER" } ?? "the desktop's browser"
    let redirectPort = RedirectPort()
    show("opening the sign-in page with \(browserName); waiting for its redirect to 127.0.0.1")
    let signIn = try await session.signIn(
        account: account, redirectURIs: [53180, 53181, 53182, 53183].map { URL(string: "http://127.0.0.1:\($0)/callback")! },
        scopes: ["openid", "profile", "email", "read:items"], timeout: .seconds(120),
        onAuthorizationURL: { redirectPort.record($0) })
    show("the browser came back to 127.0.0.1:\(redirectPort.value.map(String.init) ?? "?")/callback; code exchanged with the PKCE verifier")
    show("ID token validated (signature by the JWKS, iss, aud, exp, nonce)")
    let refresh = try store.refreshToken(account: account)
    show("stored refresh token \(refresh.map(\.description) ?? "none")")
    show("access token \(signIn.accessToken.token.fingerprint), scopes \(signIn.accessToken.grantedScopes.joined(separator: " "))")
    show("credential state: \(try session.credentialState(forUserID: appleUserID).rawValue)")

    step("Who signed in: the profile kept sealed in the store")
    let profile = try session.userProfile(account: account)
    show("user id \(shortened(profile?.userID)) (matches the Apple user: \(profile?.userID == appleUserID))")
    show("subject \(shortened(profile?.subject))")
    show("name \(profile?.name ?? "none"), email \(shortened(profile?.email))")

    step("Use: read the access token back (from the sealed cache, no network)")
    let cached = try await session.accessToken(for: account, scopes: ["read:items"])
    show("source \(cached.source.rawValue), expires \(cached.expiresAt.map { "\($0)" } ?? "unknown")")

    step("Renew silently: the server rotates the refresh token; the store swaps it atomically")
    let renewed = try await session.accessToken(for: account, scopes: ["read:items"], forceRefresh: true)
    show("source \(renewed.source.rawValue); refresh token now \(try store.refreshToken(account: account)?.description ?? "none")")

    step("The database file holds no plaintext")
    let token = try store.refreshToken(account: account)?.stringValue() ?? ""
    var hits = 0
    for suffix in ["", "-wal", "-shm"] {
        guard let bytes = FileManager.default.contents(atPath: storePath + suffix) else { continue }
        for needle in [token, appleUserID, account.name, userName, userEmail] where bytes.range(of: Data(needle.utf8)) != nil {
            hits += 1
        }
        show("tokens.sqlite\(suffix): \(bytes.count) bytes scanned")
    }
    show("refresh token, Apple user id, account name, user name, email found: \(hits) times")

    step("Log out while the server is failing (503 ×3): the user is logged out here at once")
    _ = try await control("faults", ["path": "/oauth/revoke", "status": 503, "count": 3])
    let outcome = try await session.logout(account: account)
    show("outcome: \(outcome)")
    show("refresh token offered to the app: \(try store.refreshToken(account: account) == nil ? "none" : "STILL THERE")")
    for entry in try session.pendingRevocations() {
        show("outbox: 1 entry, attempts \(entry.attempts), last error \(entry.lastError ?? "-")")
    }

    step("The server is back: resume pending revocations (at start-up, or when the network returns)")
    let report = try await session.resumePendingRevocations(includingNotDue: true)
    show("resume: \(report)")
    let introspection = try await control("introspect", ["token": token])
    show("server says the refresh token is active: \(introspection["active"] as? Bool ?? true)")

    step("Credential state history")
    show("state now: \(try session.credentialState(forUserID: appleUserID).rawValue)")
    for transition in try session.credentialStateHistory(forUserID: appleUserID) {
        show("\(transition.date)  \(transition.from.rawValue) → \(transition.to.rawValue)  \(transition.reason)\(transition.detail.map { " (\($0))" } ?? "")")
    }
    print("\nDemo finished.")
} catch {
    FileHandle.standardError.write(Data("tokenstore-demo: error: \(error)\n".utf8))
    exit(1)
}
