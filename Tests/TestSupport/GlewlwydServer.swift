import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#endif

/// Whether Debian's glewlwyd is installed (`scripts/install-deps` installs it), so CI runs the
/// glewlwyd suites; a machine without it skips them rather than fail.
public let glewlwydInstalled: Bool = access("/usr/bin/glewlwyd", X_OK) == 0

/// Debian's glewlwyd 2.7.5 (its OIDC plugin) on loopback: a real server nobody here wrote, with
/// the device grant, PAR and DPoP. `Tests/Glewlwyd/serve.py` (Debian's python3, no venv) makes
/// a throwaway server in a temporary directory — SQLite from the package's own schema, an RSA
/// key, random passwords, bound to 127.0.0.1 — and configures it through glewlwyd's admin API
/// (the OIDC plugin, the test user, a public and a confidential client). Glewlwyd is unchanged;
/// its login page (its `login_url` setting) is one that signs the test user in through
/// glewlwyd's login API, as its own page does once a person typed the password.
public final class GlewlwydServer: @unchecked Sendable {  // the process is guarded by `lock`
    /// The public client (PKCE; code, device and refresh grants).
    public static let publicClientID = "tokenstore-glewlwyd-public"
    /// The confidential client (`client_secret_post`): glewlwyd revokes only for an
    /// authenticated client.
    public static let confidentialClientID = "tokenstore-glewlwyd-confidential"
    /// Registered exactly (glewlwyd does not allow any loopback port); eight, for the glewlwyd
    /// sign-ins that run at once.
    public static let redirectURIs = (53190...53197).map { URL(string: "http://127.0.0.1:\($0)/callback")! }
    public static var script: String { repositoryRoot.appendingPathComponent("Tests/Glewlwyd/serve.py").path }

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    private let lock = NSLock()
    private var process: ChildProcess?
    public private(set) var port = 0
    public let directory: TemporaryDirectory
    public var logURL: URL { directory.appending("server.log") }
    private var portFile: URL { directory.appending("port") }
    private var stateDirectory: URL { directory.appending("state") }
    /// Whether the OIDC plugin offers pushed authorization requests (it does unless `par: false`).
    public let offersPAR: Bool
    /// glewlwyd's second user (serve.py signs in `alice` unless a login hint names this one).
    public static let secondUsername = "bob"

    /// - Parameter par: `false` configures the OIDC plugin without PAR, so that a sign-in sends
    ///   every parameter in the browser's URL.
    public init(par: Bool = true) throws {
        guard glewlwydInstalled else { throw Failure(description: "no /usr/bin/glewlwyd (scripts/install-deps installs it)") }
        offersPAR = par
        directory = try TemporaryDirectory(prefix: "tokenstore-glewlwyd")
        try lock.withLock { try launchLocked(port: 0) }
    }

    deinit { lock.withLock { terminateLocked() } }

    /// The OIDC plugin's issuer: `{external_url}/api/oidc`, no trailing slash.
    public var issuer: String { "http://127.0.0.1:\(port)/api/oidc" }
    public var tokenURL: URL { URL(string: issuer + "/token")! }

    /// The confidential client's secret (random, made by serve.py).
    public var confidentialSecret: String {
        get throws {
            let data = try Data(contentsOf: stateDirectory.appendingPathComponent("credentials.json"))
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            guard let secret = object?["confidential_secret"] as? String else { throw Failure(description: "no secret") }
            return secret
        }
    }

    public func stopTemporarily() { lock.withLock { terminateLocked() } }

    public func restart() throws { try lock.withLock { terminateLocked(); try launchLocked(port: port) } }

    private func launchLocked(port: Int) throws {
        try? FileManager.default.removeItem(at: portFile)
        let child = try ChildProcess.start(
            "/usr/bin/python3",
            [Self.script, "--state-dir", stateDirectory.path, "--port", String(port), "--port-file", portFile.path,
             "--exit-with-parent"] + (offersPAR ? [] : ["--no-par"]),
            standardOutput: .discard, standardError: .append(logURL.path), ownProcessGroup: false)
        process = child
        let deadline = Date().addingTimeInterval(120)  // an RSA key and the admin API on a loaded machine
        while Date() < deadline {
            guard child.isRunning else { throw Failure(description: "serve.py exited; log:\n\(logTail())") }
            if let text = try? String(contentsOf: portFile, encoding: .utf8),
                let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0
            {
                self.port = value
                return
            }
            usleep(50_000)
        }
        terminateLocked()
        throw Failure(description: "serve.py gave no port within 120 s; log:\n\(logTail())")
    }

    private func terminateLocked() {
        guard let child = process else { return }
        process = nil
        _ = child.stop(grace: .seconds(5))
    }

    /// How many times glewlwyd logged `user` signing in with a password (its
    /// `Event - User 'NAME' authenticated with password` lines in glewlwyd.log): its login form
    /// was submitted.
    public func passwordLogins(of user: String) -> Int {
        let log = (try? String(contentsOf: stateDirectory.appendingPathComponent("glewlwyd.log"), encoding: .utf8)) ?? ""
        let line = "Event - User '\(user)' authenticated with password"
        return log.components(separatedBy: "\n").filter { $0.contains(line) }.count
    }

    public func logTail() -> String {
        var text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? "(no log)"
        text += (try? String(contentsOf: stateDirectory.appendingPathComponent("glewlwyd.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(30).joined(separator: "\n")
    }

    // MARK: Requests

    /// Status and JSON body of one form POST (or GET without a form).
    public func request(_ url: URL, form: [String: String]? = nil, headers: [String: String] = [:]) throws -> (status: Int, json: [String: Any]) {
        var request = URLRequest(url: url, timeoutInterval: 30)
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = AuthorizationServer.formEncode(form)
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        final class Box: @unchecked Sendable { var status = 0; var data = Data() }  // written before the signal
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, response, _ in
            box.status = (response as? HTTPURLResponse)?.statusCode ?? 0
            box.data = data ?? Data()
            done.signal()
        }.resume()
        done.wait()
        let json = (try? JSONSerialization.jsonObject(with: box.data)) as? [String: Any] ?? [:]
        return (box.status, json)
    }

    /// Whether glewlwyd still honours `refreshToken` for `clientID`: a refresh grant with it
    /// (which rotates a live one: call it only on a token the test is done with). Glewlwyd
    /// refuses with a bare 400 (no `invalid_grant` body), or 401/403 for a bound token without
    /// its DPoP proof.
    public func refreshTokenIsRefused(_ refreshToken: String, clientID: String = publicClientID, secret: String? = nil) throws -> Bool {
        var form = ["grant_type": "refresh_token", "refresh_token": refreshToken, "client_id": clientID]
        if let secret { form["client_secret"] = secret }
        let answer = try request(tokenURL, form: form)
        return (400..<500).contains(answer.status)
    }

    /// Whether glewlwyd's userinfo endpoint takes `accessToken` (Bearer) now.
    public func userinfoAccepts(_ accessToken: String) throws -> Bool {
        try request(URL(string: issuer + "/userinfo")!, headers: ["Authorization": "Bearer " + accessToken]).status == 200
    }

    /// One value of glewlwyd's own SQLite database (read-only), e.g. a count.
    public func query(_ sql: String) throws -> String {
        let result = try ChildProcess.run(
            "/usr/bin/sqlite3", ["-readonly", "-cmd", ".timeout 5000", stateDirectory.appendingPathComponent("glewlwyd.sqlite").path, sql],
            timeout: .seconds(30))
        guard result.termination.succeeded else { throw Failure(description: "sqlite3: \(result.standardErrorText)") }
        return result.standardOutputText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What a person does on another device: opens `url` (the verification URI) in a browser —
    /// headless Chromium here, with glewlwyd's login page signing the test user in — and waits
    /// for the page to finish. The wrapper's exit status.
    public func openInBrowser(_ url: URL) throws -> Int32 {
        let wrapper = repositoryRoot.appendingPathComponent("scripts/headless-chromium").path
        let scratch = try TemporaryDirectory(prefix: "tokenstore-glewlwyd-browser")
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = scratch.path
        let result = try ChildProcess.run(wrapper, [url.absoluteString], environment: environment, timeout: .seconds(150))
        return result.termination.shellStatus
    }
}
