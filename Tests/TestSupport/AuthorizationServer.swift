import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The local OAuth 2.0 authorization server (Tests/AuthServer/server.py, Flask + Authlib),
/// run as a child process bound to 127.0.0.1 on a free port.
///
/// It serves `POST /oauth/token` (Auth0's native Apple token exchange, and the
/// refresh_token grant with rotation and reuse detection) and `POST /oauth/revoke`
/// (RFC 7009), plus test-only control paths under `/__test/` wrapped by the methods here.
/// The Python venv comes from `scripts/authserver venv`.
///
/// Behaviour worth knowing in tests:
/// - Rotation on (default): each refresh answers a new refresh token and marks the
///   presented one "rotated". Presenting a rotated token again is reuse: the whole family
///   (every refresh and access token from that sign-in) is revoked, answer 400
///   invalid_grant. N callers presenting one refresh token at once: one wins, and the
///   family ends up revoked.
/// - Rotation off: the refresh token stays valid and the answer has NO `refresh_token`
///   (like Auth0 for a non-rotating client).
/// - Revoking a refresh token at `/oauth/revoke` revokes its whole family.
/// - `stopTemporarily()` + `restart()` really stops the process and starts a new one on the
///   same port; tokens, codes, config and stats survive (a state file written on SIGTERM).
///
/// Browser sign-in (RFC 8252 loopback + PKCE) as Auth0 with `connection=apple` does it:
/// `GET /authorize` (exact redirect-URI match, port included; a mismatch is an error page,
/// not a redirect; `code_challenge` S256 required for the public client) → 302 to an
/// emulated Apple page that auto-submits a `form_post` to `/login/callback` → 302 to the
/// app's redirect URI with `code` and `state` → `POST /oauth/token`
/// `grant_type=authorization_code` with `code_verifier` (a code is single use; presenting it
/// again revokes its tokens, reason "code_reuse"). ID tokens are RS256 with a `kid` from
/// `/.well-known/jwks.json`; `iss` is `issuer` (trailing slash), `sub` "apple|<Apple id>",
/// and name/email come only on a user's first sign-in. Tests choose the Apple user
/// (`setNextAppleUser`), the registered callbacks (`registerRedirectURIs`) and make the
/// next sign-in go wrong (`armBadIDToken`, `armBadRedirect`). `userAgentScript` is a
/// scripted, loopback-only browser for `$BROWSER`.
public final class AuthorizationServer: @unchecked Sendable {  // mutable state is guarded by `lock`
    // MARK: Fixed facts of the server

    public static let publicClientID = "tokenstore-test"
    public static let confidentialClientID = "tokenstore-confidential"
    public static let confidentialClientSecret = "s3cret"
    public static let allowedScopes = "openid profile email offline_access read:items write:items"
    public static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    public static let appleAuthorizationCodeTokenType = "http://auth0.com/oauth/token-type/apple-authz-code"
    public static let tokenPath = "/oauth/token"
    public static let revokePath = "/oauth/revoke"
    public static let authorizePath = "/authorize"
    public static let jwksPath = "/.well-known/jwks.json"
    public static let openIDConfigurationPath = "/.well-known/openid-configuration"
    /// Loopback callback ports every client has registered by default, each exactly as
    /// `http://127.0.0.1:PORT/callback` (see `defaultRedirectURIs`).
    public static let defaultCallbackPorts = [53180, 53181, 53182, 53183]
    public static let defaultRedirectURIs = defaultCallbackPorts.map { "http://127.0.0.1:\($0)/callback" }
    /// Who signs in at the emulated Apple page when a test chose nobody.
    public static let defaultAppleUserID = "000792.d71059495fa24644b94e4a644e2e3b4a.0638"
    public static let defaultAppleUserName = "Jane Appleseed"
    public static let defaultAppleUserEmail = "jane.appleseed@privaterelay.appleid.com"
    /// Tests/AuthServer/useragent.py, a scripted browser usable as `$BROWSER`: it follows the
    /// sign-in to the app's loopback callback and refuses any host but 127.0.0.1, localhost
    /// and ::1. Exit 0 when it ended at a page (the callback, or e.g. an error page), 1 on a
    /// transport error, 2 when it refused a host. Environment: `TOKENSTORE_USERAGENT_LOG`
    /// (a file: one line a request, no query strings, then "END ..."),
    /// `TOKENSTORE_USERAGENT_DETACH=1` (return at once, browse in the background).
    public static var userAgentScript: URL {
        repositoryRoot.appendingPathComponent("Tests/AuthServer/useragent.py")
    }

    public enum Failure: Error, CustomStringConvertible {
        case pythonMissing(path: String)
        case startFailed(String)
        case notRunning
        case controlFailed(path: String, status: Int, body: String)
        case transport(path: String, underlying: String)

        public var description: String {
            switch self {
            case .pythonMissing(let path):
                return "AuthorizationServer: no Python at \(path). Run `scripts/authserver venv` "
                    + "(from the repository root) to create .build/authserver-venv, "
                    + "or set TOKENSTORE_AUTHSERVER_PYTHON."
            case .startFailed(let why): return "AuthorizationServer failed to start: \(why)"
            case .notRunning: return "AuthorizationServer is not running"
            case .controlFailed(let path, let status, let body):
                return "AuthorizationServer \(path) answered \(status): \(body.prefix(500))"
            case .transport(let path, let underlying):
                return "AuthorizationServer \(path) unreachable: \(underlying)"
            }
        }
    }

    // MARK: State

    private let lock = NSLock()
    /// The server: our child (`python server.py`), or forked by the process's ``ServerZygote``.
    private enum Running {
        case child(ChildProcess)
        case forked(ForkedServer)
        var isRunning: Bool {
            switch self {
            case .child(let child): child.isRunning
            case .forked(let server): server.isRunning
            }
        }
        func stop(grace: Duration) {
            switch self {
            case .child(let child): child.stop(grace: grace)
            case .forked(let server): server.stop(grace: grace)
            }
        }
    }
    private var process: Running?
    private var currentPort: Int = 0
    private let workDirectory: TemporaryDirectory
    private let python: String
    private let script: String
    private let logRequests: Bool
    private let session: URLSession

    /// The server's log: one line a request (method, path, status), and Python errors.
    public var logURL: URL { workDirectory.appending("server.log") }
    private var stateURL: URL { workDirectory.appending("state.json") }
    private var portFileURL: URL { workDirectory.appending("port") }

    /// Starts the server and waits (bounded) until it answers.
    /// - Parameter port: 0 picks a free port.
    public init(port: Int = 0, logRequests: Bool = true, startTimeout: TimeInterval = 20) throws {
        let env = ProcessInfo.processInfo.environment
        python = env["TOKENSTORE_AUTHSERVER_PYTHON"]
            ?? repositoryRoot.appendingPathComponent(".build/authserver-venv/bin/python").path
        script = env["TOKENSTORE_AUTHSERVER_SCRIPT"]
            ?? repositoryRoot.appendingPathComponent("Tests/AuthServer/server.py").path
        self.logRequests = logRequests
        workDirectory = try TemporaryDirectory(prefix: "tokenstore-authserver")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Failure.pythonMissing(path: python)
        }
        try lock.withLock { try launchLocked(port: port, timeout: startTimeout) }
    }

    deinit {
        stop()
        session.invalidateAndCancel()
    }

    // MARK: Addresses

    public var port: Int { lock.withLock { currentPort } }
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    public var tokenURL: URL { baseURL.appendingPathComponent("oauth/token") }
    public var revokeURL: URL { baseURL.appendingPathComponent("oauth/revoke") }
    public var authorizeURL: URL { baseURL.appendingPathComponent("authorize") }
    public var jwksURL: URL { URL(string: baseURL.absoluteString + Self.jwksPath)! }
    public var openIDConfigurationURL: URL { URL(string: baseURL.absoluteString + Self.openIDConfigurationPath)! }
    /// The ID tokens' `iss`: "http://127.0.0.1:PORT/", trailing slash included (as Auth0's).
    public var issuer: String { baseURL.absoluteString + "/" }
    public var isRunning: Bool { lock.withLock { process?.isRunning ?? false } }
    /// Whether this server was forked by the process's ``ServerZygote`` (else it is `python server.py`).
    public var forkedByZygote: Bool {
        lock.withLock { if case .forked? = process { true } else { false } }
    }
    /// Whether servers start from the zygote in this process (`TOKENSTORE_AUTHSERVER_ZYGOTE=0` turns it off).
    public static var zygoteWanted: Bool {
        let env = ProcessInfo.processInfo.environment
        return env["TOKENSTORE_AUTHSERVER_ZYGOTE"] != "0" && env["TOKENSTORE_AUTHSERVER_SCRIPT"] == nil
    }

    // MARK: Life cycle

    /// Stops the server for good (SIGTERM, SIGKILL after 5 s). Idempotent.
    public func stop() {
        lock.withLock { terminateLocked() }
    }

    /// Stops the process; connections to `port` are refused until `restart()`.
    /// The server saves its state on the way down.
    public func stopTemporarily() {
        lock.withLock { terminateLocked() }
    }

    /// Starts a new server process on the same port with the state the last one saved.
    public func restart(timeout: TimeInterval = 20) throws {
        try lock.withLock {
            terminateLocked()
            try launchLocked(port: currentPort, timeout: timeout)
        }
    }

    private func launchLocked(port: Int, timeout: TimeInterval) throws {
        let fm = FileManager.default
        try? fm.removeItem(at: portFileURL)

        var arguments = [
            script, "--host", "127.0.0.1", "--port", String(port),
            "--port-file", portFileURL.path, "--state-file", stateURL.path, "--exit-with-parent",
        ]
        if !logRequests { arguments.append("--quiet") }
        let child: Running
        if let zygote = ServerZygote.shared {
            child = .forked(try zygote.start(Array(arguments.dropFirst()), standardError: logURL.path, timeout: timeout))
        } else {
            do {
                // The server outlives this call (and this thread): it watches its parent itself
                // (--exit-with-parent) instead of PR_SET_PDEATHSIG, which fires when the spawning
                // thread ends.
                child = .child(try ChildProcess.start(
                    python, arguments, standardOutput: .discard, standardError: .append(logURL.path),
                    ownProcessGroup: false))
            } catch {
                throw Failure.startFailed("cannot run \(python): \(error)")
            }
        }
        process = child

        let deadline = Date().addingTimeInterval(timeout)
        var chosen = 0
        while chosen == 0 {
            if !child.isRunning {
                process = nil
                throw Failure.startFailed("the server exited; log:\n\(logTail())")
            }
            if let text = try? String(contentsOf: portFileURL, encoding: .utf8),
                let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0
            {
                chosen = value
                break
            }
            if Date() > deadline {
                terminateLocked()
                throw Failure.startFailed("no port within \(timeout) s; log:\n\(logTail())")
            }
            usleep(20_000)
        }
        currentPort = chosen
        let health = URL(string: "http://127.0.0.1:\(chosen)/__test/health")!
        while true {
            if let answer = try? send(URLRequest(url: health), path: "/__test/health", timeout: 2),
                answer.status == 200
            {
                return
            }
            if !child.isRunning || Date() > deadline {
                terminateLocked()
                throw Failure.startFailed("not answering on port \(chosen); log:\n\(logTail())")
            }
            usleep(20_000)
        }
    }

    private func terminateLocked() {
        guard let child = process else { return }
        process = nil
        child.stop(grace: .seconds(5))  // SIGTERM: the server saves its state and exits
    }

    private func logTail() -> String {
        guard let text = try? String(contentsOf: logURL, encoding: .utf8) else { return "(no log)" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(20)
            .joined(separator: "\n")
    }

    // MARK: Faults

    /// One injected answer for the next `count` matching requests (queued in order; the
    /// first queued entry whose path matches is used). `/__test/` paths never match.
    public struct Fault: Sendable {
        public enum Drop: String, Sendable {
            case eof  // close the connection without any HTTP answer (client sees EOF)
            case reset  // close with an RST (client sees "connection reset by peer")
        }
        public enum Phase: String, Sendable {
            case before  // answer instead of the real endpoint (it never runs)
            case after  // the real endpoint runs (token rotated/revoked), its answer is lost
        }

        /// "/oauth/token", "/oauth/revoke" or "*".
        public var path: String
        public var count: Int
        public var status: Int?
        public var headers: [String: String]
        public var body: String?
        /// Defaults to application/json when `body` parses as JSON, else text/plain.
        public var contentType: String?
        /// Seconds to wait before answering (the real answer if nothing else is set).
        public var delay: Double?
        public var drop: Drop?
        /// A Location; the status defaults to 307.
        public var redirect: String?
        /// Send the headers at once, then the body spread over this many seconds.
        public var slowBody: Double?
        public var phase: Phase

        public init(
            path: String = "*", count: Int = 1, status: Int? = nil, headers: [String: String] = [:],
            body: String? = nil, contentType: String? = nil, delay: Double? = nil, drop: Drop? = nil,
            redirect: String? = nil, slowBody: Double? = nil, phase: Phase = .before
        ) {
            self.path = path
            self.count = count
            self.status = status
            self.headers = headers
            self.body = body
            self.contentType = contentType
            self.delay = delay
            self.drop = drop
            self.redirect = redirect
            self.slowBody = slowBody
            self.phase = phase
        }

        public static func status(
            _ status: Int, path: String = "*", count: Int = 1, retryAfter: String? = nil,
            body: String? = nil, contentType: String? = nil
        ) -> Fault {
            Fault(
                path: path, count: count, status: status,
                headers: retryAfter.map { ["Retry-After": $0] } ?? [:], body: body, contentType: contentType)
        }

        public static func drop(_ mode: Drop = .eof, path: String = "*", count: Int = 1, phase: Phase = .before)
            -> Fault
        {
            Fault(path: path, count: count, drop: mode, phase: phase)
        }

        public static func delay(_ seconds: Double, path: String = "*", count: Int = 1) -> Fault {
            Fault(path: path, count: count, delay: seconds)
        }

        public static func redirect(to location: String, status: Int = 307, path: String = "*", count: Int = 1)
            -> Fault
        {
            Fault(path: path, count: count, status: status, redirect: location)
        }

        public static func slowBody(_ seconds: Double, path: String = "*", count: Int = 1) -> Fault {
            Fault(path: path, count: count, slowBody: seconds)
        }

        var json: [String: Any] {
            var out: [String: Any] = ["path": path, "count": count, "phase": phase.rawValue]
            if let status { out["status"] = status }
            if !headers.isEmpty { out["headers"] = headers }
            if let body { out["body"] = body }
            if let contentType { out["content_type"] = contentType }
            if let delay { out["delay"] = delay }
            if let drop { out["drop"] = drop.rawValue }
            if let redirect { out["redirect"] = redirect }
            if let slowBody { out["slow_body"] = slowBody }
            return out
        }
    }

    /// Queues faults (in order) for the next matching requests.
    public func inject(_ faults: Fault...) throws {
        _ = try control("POST", "faults", faults.map(\.json))
    }

    public func clearFaults() throws {
        _ = try control("DELETE", "faults", nil)
    }

    // MARK: Apple, tokens, state

    /// A fresh single-use Apple authorization code bound to `appleUserID` (the id token's sub).
    public func appleAuthorizationCode(for appleUserID: String) throws -> String {
        let answer = try control("POST", "apple/code", ["sub": appleUserID])
        guard let code = answer["code"] as? String else {
            throw Failure.controlFailed(path: "/__test/apple/code", status: 200, body: "no code")
        }
        return code
    }

    public struct Introspection: Sendable, Equatable {
        public var active: Bool
        /// "refresh", "access", or nil for an unknown token.
        public var kind: String?
        public var familyRevoked: Bool
        /// nil when active; else "rotated", "revoked", "reuse" (family revoked by reuse
        /// detection), "code_reuse" (its authorization code was presented again) or "expired".
        public var reason: String?
        public var subject: String?
        public var scope: String?
        public var clientID: String?
        /// The API an access token is for (`audience` of its grant), nil for the default.
        public var audience: String? = nil
        /// The DPoP key's RFC 7638 thumbprint the token is bound to (`cnf.jkt`), nil for Bearer.
        public var jkt: String? = nil
    }

    public func introspect(_ token: String) throws -> Introspection {
        let j = try control("POST", "introspect", ["token": token])
        return Introspection(
            active: j["active"] as? Bool ?? false, kind: j["kind"] as? String,
            familyRevoked: j["family_revoked"] as? Bool ?? false, reason: j["reason"] as? String,
            subject: j["sub"] as? String, scope: j["scope"] as? String, clientID: j["client_id"] as? String,
            audience: j["audience"] as? String, jkt: (j["cnf"] as? [String: Any])?["jkt"] as? String)
    }

    /// The server's verdict on one DPoP proof (POST /__test/dpop/check, Tests/AuthServer/dpop.py):
    /// the key's RFC 7638 thumbprint and the decoded header and claims, or the error.
    public struct DPoPVerdict: @unchecked Sendable {  // plain JSON values, never changed
        public var jkt: String?
        public var error: String?
        public var description: String?
        public var header: [String: Any]
        public var claims: [String: Any]
    }

    /// Verifies `proof` as the token endpoint does (no nonce asked; the `jti` is remembered,
    /// so the same proof twice is a replay).
    public func checkDPoPProof(_ proof: String, method: String, url: String, accessToken: String? = nil) throws
        -> DPoPVerdict
    {
        var body: [String: Any] = ["proof": proof, "method": method, "url": url]
        if let accessToken { body["access_token"] = accessToken }
        var request = URLRequest(url: URL(string: baseURL.absoluteString + "/__test/dpop/check")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        let answer = try send(request, path: "/__test/dpop/check", timeout: 30)
        let j = answer.json ?? [:]
        return DPoPVerdict(
            jkt: j["jkt"] as? String, error: j["error"] as? String, description: j["error_description"] as? String,
            header: j["header"] as? [String: Any] ?? [:], claims: j["claims"] as? [String: Any] ?? [:])
    }

    /// GET /userinfo with `Authorization: authorization` and, when given, a `DPoP` proof: the
    /// HTTP status (200 when the server accepted the token and its proof).
    public func userinfoStatus(authorization: String, dpop: String? = nil) throws -> Int {
        try userinfo(authorization: authorization, dpop: dpop).status
    }

    /// GET /userinfo as ``userinfoStatus(authorization:dpop:)``, with the `DPoP-Nonce` the answer
    /// carried (the resource server asking for a nonce: `dpop(["resource_nonce": true])`).
    public func userinfo(authorization: String, dpop: String? = nil) throws -> (status: Int, dpopNonce: String?) {
        var request = URLRequest(url: URL(string: baseURL.absoluteString + "/userinfo")!)
        request.httpMethod = "GET"
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        if let dpop { request.setValue(dpop, forHTTPHeaderField: "DPoP") }
        let answer = try send(request, path: "/userinfo", timeout: 30)
        return (answer.status, answer.headers.first { $0.key.lowercased() == "dpop-nonce" }?.value)
    }

    /// The server's DPoP switches (POST /__test/dpop: rotate_nonce, reject_next, required,
    /// nonce_required, iat_window, forget_jtis, resource_nonce); answers the DPoP state (nonce, ...).
    @discardableResult
    public func dpop(_ switches: [String: Any] = [:]) throws -> [String: Any] {
        try control(switches.isEmpty ? "GET" : "POST", "dpop", switches.isEmpty ? nil : switches)
    }

    /// One of the server's counters by its name in GET /__test/stats (the DPoP ones included:
    /// dpop_proofs, dpop_nonce_challenges, dpop_invalid_proofs, dpop_key_mismatches).
    public func counter(_ name: String) throws -> Int {
        try control("GET", "stats", nil)[name] as? Int ?? -1
    }

    public struct Stats: Sendable, Equatable {
        /// Requests that reached /oauth/token (faulted ones too).
        public var tokenRequests: Int
        /// Requests that reached /oauth/revoke (faulted ones too).
        public var revokeRequests: Int
        /// Successful refresh_token grants.
        public var refreshGrants: Int
        /// Successful Apple token exchanges.
        public var exchangeGrants: Int
        /// Revoke calls the real endpoint answered 200.
        public var revocations: Int
        /// Families revoked because a rotated refresh token came back.
        public var reuseDetections: Int
        /// Rotated refresh tokens presented (each is a reuse; several may hit one family).
        public var reusePresentations: Int
        public var invalidGrants: Int
        public var faultHits: Int
        /// Authorization codes issued to an app's redirect URI (browser sign-ins).
        public var authorizations: Int
        /// Successful authorization_code grants.
        public var codeGrants: Int
        public var activeRefreshTokens: Int
        public var families: Int
        public var revokedFamilies: Int
        public var pendingFaults: Int
    }

    public func stats() throws -> Stats {
        let j = try control("GET", "stats", nil)
        func n(_ key: String) -> Int { (j[key] as? NSNumber)?.intValue ?? 0 }
        return Stats(
            tokenRequests: n("token_requests"), revokeRequests: n("revoke_requests"),
            refreshGrants: n("refresh_grants"), exchangeGrants: n("exchange_grants"),
            revocations: n("revocations"), reuseDetections: n("reuse_detections"),
            reusePresentations: n("reuse_presentations"), invalidGrants: n("invalid_grants"),
            faultHits: n("fault_hits"), authorizations: n("authorizations"), codeGrants: n("code_grants"),
            activeRefreshTokens: n("active_refresh_tokens"),
            families: n("families"), revokedFamilies: n("revoked_families"), pendingFaults: n("pending_faults"))
    }

    /// Back to defaults: empty stores, zero stats, no faults, rotation on, access tokens 3600 s.
    public func reset() throws {
        _ = try control("POST", "reset", [String: Any]())
    }

    /// Changes only what is given. `refreshTokenTTL`: `.some(nil)` = never expire.
    /// `reuseInterval`: seconds a rotated-out refresh token still works (Auth0's reuse interval).
    public func configure(
        rotateRefreshTokens: Bool? = nil, accessTokenTTL: Double? = nil, refreshTokenTTL: Double?? = nil,
        declinedScopes: [String]? = nil, reuseInterval: Double? = nil
    ) throws {
        var body: [String: Any] = [:]
        if let reuseInterval { body["reuse_interval"] = reuseInterval }
        if let declinedScopes { body["declined_scopes"] = declinedScopes }
        if let rotateRefreshTokens { body["rotate_refresh_tokens"] = rotateRefreshTokens }
        if let accessTokenTTL { body["access_token_ttl"] = accessTokenTTL }
        if let refreshTokenTTL { body["refresh_token_ttl"] = refreshTokenTTL.map { $0 as Any } ?? NSNull() }
        _ = try control("POST", "config", body)
    }

    /// Pushed authorization requests (RFC 9126): `enabled` advertises `/oauth/par` in the
    /// discovery document; `required` refuses an `/authorize` without `request_uri`.
    public func configurePAR(enabled: Bool, required: Bool = false) throws {
        _ = try control("POST", "config", ["par": enabled, "require_par": required])
    }

    /// The device grant (POST /__test/device): settings (`interval`, `expires_in`, `slow_down`:
    /// the next N polls answered `slow_down`) and the test acting as the user (`approve`,
    /// `deny`, `expire` a user code; `apple_id` who approves). Answers the settings, the codes
    /// (user code, status, `polls`: their times, `interval`; never the device code) and
    /// `authorize_log` (the parameter names of the last GET /authorize requests).
    @discardableResult
    public func device(_ body: [String: Any] = [:]) throws -> [String: Any] {
        try control(body.isEmpty ? "GET" : "POST", "device", body.isEmpty ? nil : body)
    }

    /// The protected test API (Tests/AuthServer/protected_api.py): `/api/notes`, which takes the
    /// server's access tokens as `/userinfo` does and answers challenges on demand.
    public var notesURL: URL { URL(string: baseURL.absoluteString + "/api/notes")! }

    /// The protected API's policy (POST /__test/resource): `invalid_token_next` (n), `acr_values`
    /// ([..] | NSNull), `max_age` (s | NSNull), `resource_metadata` (NSNull, "own", "foreign",
    /// "other_resource", "not_json"), `age_sign_ins` (s). A sign-in's acr (the browser
    /// sign-in's `acrValues`) is on its grant, so its access tokens carry it to the API. Answers the policy
    /// and `counters` (requests, ok, refused, forced_invalid, step_ups, metadata_requests).
    @discardableResult
    public func resource(_ body: [String: Any] = [:]) throws -> [String: Any] {
        try control(body.isEmpty ? "GET" : "POST", "resource", body.isEmpty ? nil : body)
    }

    /// One counter of the protected API (``resource(_:)``'s `counters`).
    public func resourceCounter(_ name: String) throws -> Int {
        ((try resource()["counters"] as? [String: Any])?[name] as? NSNumber)?.intValue ?? -1
    }

    /// Revokes, server-side and without client authentication, the family of `token`
    /// (like an administrator or Apple revoking the grant). Returns the families revoked.
    @discardableResult
    public func revokeGrant(containing token: String) throws -> Int {
        let j = try control("POST", "revoke", ["token": token])
        return (j["revoked_families"] as? NSNumber)?.intValue ?? 0
    }

    /// Revokes every grant of an Apple user id. Returns the families revoked.
    @discardableResult
    public func revokeGrants(forAppleUserID appleUserID: String) throws -> Int {
        let j = try control("POST", "revoke", ["sub": appleUserID])
        return (j["revoked_families"] as? NSNumber)?.intValue ?? 0
    }

    // MARK: Browser sign-in (OIDC)

    /// Ways the next sign-in's ID token is bad (each armed switch is used once, by the next
    /// browser sign-in's code or the next native Apple exchange). What each breaks is what
    /// an Auth0.swift-like validator must reject.
    public enum BadIDToken: String, Sendable, CaseIterable {
        /// `aud` is another client (`value`, default "another-client").
        case wrongAudience = "wrong_aud"
        /// `iss` is `value`, default the issuer without its trailing slash.
        case wrongIssuer = "wrong_iss"
        /// `exp` one hour ago.
        case expired
        /// RS256 with the right `kid`, one signature bit flipped.
        case badSignature = "bad_signature"
        /// Signed with the real key; the header's `kid` (`value`, default random) is not in the JWKS.
        case unknownKeyID = "unknown_kid"
        /// Signed with the real key; no `kid` in the header.
        case missingKeyID = "missing_kid"
        /// `alg: none`, empty signature.
        case algorithmNone = "alg_none"
        /// HS256 keyed with the public key's PEM (the key-confusion attack).
        case algorithmHS256 = "alg_hs256"
        /// `nonce` is `value` (default random), even when the app sent none.
        case wrongNonce = "wrong_nonce"
        /// No `nonce` although the app sent one.
        case missingNonce = "missing_nonce"
        /// No `sub`.
        case missingSubject = "missing_sub"
        /// `aud` [client_id, audience] without `azp`.
        case missingAuthorizedParty = "missing_azp"
        /// `auth_time` one day ago (fails a `max_age` check).
        case oldAuthTime = "old_auth_time"
        /// No `auth_time` (fails a `max_age` check).
        case missingAuthTime = "missing_auth_time"
        /// `acr` is `value`, default `urn:tokenstore:test:weak` (fails an `acr_values` check).
        case wrongACR = "wrong_acr"
    }

    /// What one `GET /authorize` asked for, as the server recorded it, and whether it showed
    /// a login page (`false`: its browser session answered at once).
    public struct AuthorizationRecord: Sendable, Equatable {
        public var prompt: String?
        public var loginHint: String?
        public var maxAge: String?
        public var acrValues: String?
        public var loginForm: Bool

        public init(prompt: String?, loginHint: String?, maxAge: String?, acrValues: String?, loginForm: Bool) {
            (self.prompt, self.loginHint, self.maxAge, self.acrValues, self.loginForm) =
                (prompt, loginHint, maxAge, acrValues, loginForm)
        }
    }

    /// The last 20 `GET /authorize` requests that passed the server's checks, newest last.
    public func authorizations() throws -> [AuthorizationRecord] {
        let list = try control("GET", "oidc", nil)["authorizations"] as? [[String: Any]] ?? []
        return list.map {
            AuthorizationRecord(
                prompt: $0["prompt"] as? String, loginHint: $0["login_hint"] as? String, maxAge: $0["max_age"] as? String,
                acrValues: $0["acr_values"] as? String, loginForm: $0["login_form"] as? Bool ?? false)
        }
    }

    /// Every browser session at the server authenticated `seconds` earlier than it was.
    public func ageBrowserSessions(by seconds: Int) throws {
        _ = try control("POST", "oidc/sessions", ["age": seconds])
    }

    /// The number of live browser sessions at the server.
    /// One request at an end-session endpoint (`/oidc/logout` or Auth0's `/v2/logout`), as the
    /// server recorded it.
    public struct EndSessionRecord: Sendable, Equatable {
        /// `oidc` or `auth0`.
        public var kind: String
        /// The `sub` of the `id_token_hint`, when one came.
        public var idTokenHintSubject: String?
        /// Whether a `state` came (and was echoed).
        public var state: Bool
        /// Whether the request's cookie named a browser session, which was ended.
        public var ended: Bool

        public init(kind: String, idTokenHintSubject: String?, state: Bool, ended: Bool) {
            self.kind = kind
            self.idTokenHintSubject = idTokenHintSubject
            self.state = state
            self.ended = ended
        }
    }

    /// The last 20 end-session requests, newest last.
    public func endSessions() throws -> [EndSessionRecord] {
        let list = try control("GET", "oidc", nil)["end_sessions"] as? [[String: Any]] ?? []
        return list.map {
            EndSessionRecord(
                kind: $0["kind"] as? String ?? "", idTokenHintSubject: $0["id_token_hint_sub"] as? String,
                state: $0["state"] as? Bool ?? false, ended: $0["ended"] as? Bool ?? false)
        }
    }

    public func browserSessionCount() throws -> Int {
        (try control("GET", "oidc", nil)["sessions"] as? [Any])?.count ?? -1
    }

    /// The acr values a login at the server can meet (`nil`: every one asked for).
    public func setSupportedACR(_ values: [String]?) throws {
        _ = try control("POST", "oidc/acr", ["supported": values.map { $0 as Any } ?? NSNull()])
    }

    /// Ways the next browser sign-in's redirect to the app goes wrong (used once).
    public enum BadRedirect: Sendable, Equatable {
        /// The redirect carries a `state` the app never sent (and a valid code).
        case wrongState
        /// The user cancels at Apple: `error=access_denied`, `error_description` (default
        /// "The user cancelled the sign-in at Apple (user_cancelled_authorize)."), the app's `state`.
        case accessDenied(description: String? = nil)
        /// `/login/callback` answers a page and never redirects: the callback never comes.
        case noRedirect
        /// The redirect carries `error=<error>` (such as `invalid_scope`) and the app's `state`.
        case oauthError(String, description: String? = nil)
        /// The redirect carries `iss=https://attacker.example/` (an RFC 9207 mix-up) and a valid code.
        case wrongIssuerParameter
    }

    /// The provider profiles of the server (Tests/AuthServer/profiles.py).
    public static let profiles = ["auth0", "okta", "keycloak", "entra", "google"]

    /// Makes the server answer as the provider `name` (one of ``profiles``) until `reset()`.
    public func setProfile(_ name: String) throws {
        _ = try control("POST", "config", ["profile": name])
    }

    /// The Apple user of the next browser sign-in (unless `/authorize` has a test-only
    /// `login_hint`), then back to `defaultAppleUserID`. `name`/`email` are remembered for
    /// this Apple id; they reach the ID token only on the user's first sign-in.
    /// `firstSignIn: true` makes the next sign-in a first one again (the user revoked the app
    /// at Apple); `false` marks the user as seen.
    public func setNextAppleUser(
        _ appleUserID: String, name: String? = nil, email: String? = nil, firstSignIn: Bool? = nil
    ) throws {
        var body: [String: Any] = ["apple_id": appleUserID]
        if let name { body["name"] = name }
        if let email { body["email"] = email }
        if let firstSignIn { body["first_sign_in"] = firstSignIn }
        _ = try control("POST", "oidc/next_user", body)
    }

    /// Replaces the callback URLs registered for `clientID`; matching is exact (port
    /// included) unless `anyLoopbackPort` (RFC 8252 7.3: a loopback URI may differ in port).
    /// `reset()` restores `defaultRedirectURIs`.
    public func registerRedirectURIs(
        _ redirectURIs: [String], clientID: String = AuthorizationServer.publicClientID,
        anyLoopbackPort: Bool = false
    ) throws {
        _ = try control(
            "POST", "oidc/redirect_uris",
            ["client_id": clientID, "redirect_uris": redirectURIs, "any_loopback_port": anyLoopbackPort])
    }

    /// The next sign-in's ID token is bad in this way. `value` overrides the wrong
    /// audience, issuer, key id or nonce.
    public func armBadIDToken(_ kind: BadIDToken, value: String? = nil) throws {
        var body: [String: Any] = ["fault": kind.rawValue]
        if let value { body["value"] = value }
        _ = try control("POST", "oidc/next_id_token", body)
    }

    /// The next browser sign-in's redirect to the app goes wrong in this way.
    public func armBadRedirect(_ kind: BadRedirect) throws {
        var body: [String: Any]
        switch kind {
        case .wrongState: body = ["fault": "wrong_state"]
        case .accessDenied(let description):
            body = ["fault": "access_denied"]
            if let description { body["error_description"] = description }
        case .noRedirect: body = ["fault": "no_redirect"]
        case .oauthError(let error, let description):
            body = ["fault": "oauth_error", "error": error]
            if let description { body["error_description"] = description }
        case .wrongIssuerParameter: body = ["fault": "wrong_iss_param"]
        }
        _ = try control("POST", "oidc/next_redirect", body)
    }

    /// Disarms `setNextAppleUser`, `armBadIDToken` and `armBadRedirect`.
    public func disarmSignInSwitches() throws {
        _ = try control("DELETE", "oidc/next", nil)
    }

    /// Signs with a new RSA key from now on; the old public key stays in the JWKS unless
    /// `keepOld` is false. Returns the new key id.
    @discardableResult
    public func rotateSigningKey(keepOld: Bool = true) throws -> String {
        _ = try control("POST", "oidc/rotate_key", ["keep_old": keepOld])
        return try signingKeyID()
    }

    /// The `kid` of the key that signs ID tokens now (kept across restarts and `reset()`).
    public func signingKeyID() throws -> String {
        let j = try control("GET", "oidc", nil)
        guard let kid = j["kid"] as? String else {
            throw Failure.controlFailed(path: "/__test/oidc", status: 200, body: "no kid")
        }
        return kid
    }

    /// `/authorize?…` with `parameters` form-encoded (e.g. response_type, client_id,
    /// redirect_uri, scope, state, nonce, code_challenge, code_challenge_method, connection,
    /// audience, max_age, prompt, login_hint).
    public func authorizationRequestURL(_ parameters: [String: String]) -> URL {
        URL(string: authorizeURL.absoluteString + "?" + String(decoding: Self.formEncode(parameters), as: UTF8.self))!
    }

    // MARK: Convenience: a signed-in user

    public struct Tokens: Sendable {
        public var accessToken: String
        public var refreshToken: String?
        public var idToken: String?
        public var expiresIn: Double
        public var scope: String
    }

    /// Emulates a sign-in: a fresh Apple code, exchanged at /oauth/token.
    public func signIn(
        appleUserID: String, scope: String = "openid profile email offline_access",
        clientID: String = AuthorizationServer.publicClientID, clientSecret: String? = nil
    ) throws -> Tokens {
        let code = try appleAuthorizationCode(for: appleUserID)
        var form = [
            "grant_type": Self.tokenExchangeGrantType,
            "subject_token_type": Self.appleAuthorizationCodeTokenType,
            "subject_token": code, "client_id": clientID, "scope": scope,
        ]
        if let clientSecret { form["client_secret"] = clientSecret }
        let answer = try post(Self.tokenPath, form: form)
        guard answer.status == 200, let j = answer.json, let access = j["access_token"] as? String else {
            throw Failure.controlFailed(path: Self.tokenPath, status: answer.status, body: answer.text)
        }
        return Tokens(
            accessToken: access, refreshToken: j["refresh_token"] as? String, idToken: j["id_token"] as? String,
            expiresIn: (j["expires_in"] as? NSNumber)?.doubleValue ?? 0, scope: j["scope"] as? String ?? "")
    }

    // MARK: Raw HTTP

    public struct Answer: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: Data
        public var text: String { String(decoding: body, as: UTF8.self) }
        /// The body as a JSON object, if it is one.
        public var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        }
        /// A header, case-insensitively.
        public func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    /// A form-encoded POST to the server (e.g. `/oauth/token`); any status is returned.
    public func post(_ path: String, form: [String: String], timeout: TimeInterval = 30) throws -> Answer {
        var request = URLRequest(url: URL(string: baseURL.absoluteString + path)!)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Self.formEncode(form)
        return try send(request, path: path, timeout: timeout)
    }

    public static func formEncode(_ form: [String: String]) -> Data {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let pairs = form.sorted { $0.key < $1.key }.map { key, value in
            let k = key.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
            let v = value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
            return "\(k)=\(v)"
        }
        return Data(pairs.joined(separator: "&").utf8)
    }

    private func control(_ method: String, _ name: String, _ body: Any?) throws -> [String: Any] {
        let path = "/__test/\(name)"
        guard isRunning else { throw Failure.notRunning }
        var request = URLRequest(url: URL(string: baseURL.absoluteString + path)!)
        request.httpMethod = method
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
        }
        let answer = try send(request, path: path, timeout: 30)
        guard answer.status == 200 else {
            throw Failure.controlFailed(path: path, status: answer.status, body: answer.text)
        }
        return answer.json ?? [:]
    }

    private final class Outcome: @unchecked Sendable {  // written once before `done` is signalled, read after
        var data: Data?
        var response: URLResponse?
        var error: Error?
    }

    private func send(_ request: URLRequest, path: String, timeout: TimeInterval) throws -> Answer {
        var request = request
        request.timeoutInterval = timeout
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: request) { data, response, error in
            outcome.data = data
            outcome.response = response
            outcome.error = error
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + timeout + 5) == .timedOut {
            task.cancel()
            throw Failure.transport(path: path, underlying: "no answer within \(timeout) s")
        }
        if let error = outcome.error {
            throw Failure.transport(path: path, underlying: String(describing: error))
        }
        guard let http = outcome.response as? HTTPURLResponse else {
            throw Failure.transport(path: path, underlying: "not an HTTP answer")
        }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            headers[String(describing: key)] = String(describing: value)
        }
        return Answer(status: http.statusCode, headers: headers, body: outcome.data ?? Data())
    }
}
