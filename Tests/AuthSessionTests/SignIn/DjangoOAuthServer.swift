import Foundation
import TestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#endif

/// django-oauth-toolkit (DOT) on loopback: the tiny Django project of Tests/DjangoOAuth
/// (serve.py, the stdlib's wsgiref) in `.build/dot-venv` (`scripts/dotserver venv`, part of
/// `make deps`). DOT itself is unchanged; the project adds only a login page that submits the
/// test user's credentials itself and counters under `/__test/`. Its SQLite database, RSA key
/// and port survive ``stopTemporarily()`` and ``restart()``.
final class DjangoOAuthServer: @unchecked Sendable {  // the process is guarded by `lock`
    /// The public client serve.py registers (redirect URIs http://127.0.0.1:53180-53183/callback).
    static let clientID = "tokenstore-dot-public"
    static let redirectURIs = (53180...53183).map { URL(string: "http://127.0.0.1:\($0)/callback")! }
    static var python: String { repositoryRoot.appendingPathComponent(".build/dot-venv/bin/python").path }
    static var script: String { repositoryRoot.appendingPathComponent("Tests/DjangoOAuth/serve.py").path }

    struct Failure: Error, CustomStringConvertible { let description: String }

    private let lock = NSLock()
    private var process: ChildProcess?
    private(set) var port = 0
    let directory: TemporaryDirectory
    var logURL: URL { directory.appending("server.log") }
    private var portFile: URL { directory.appending("port") }

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw Failure(description: "no \(Self.python): run scripts/dotserver venv (make deps)")
        }
        directory = try TemporaryDirectory(prefix: "tokenstore-dot")
        try lock.withLock { try launchLocked(port: 0) }
    }

    deinit { lock.withLock { terminateLocked() } }

    /// DOT's issuer: its mount path, no trailing slash.
    var issuer: String { "http://127.0.0.1:\(port)/o" }
    var tokenURL: URL { URL(string: issuer + "/token/")! }

    func stopTemporarily() { lock.withLock { terminateLocked() } }

    func restart() throws { try lock.withLock { terminateLocked(); try launchLocked(port: port) } }

    private func launchLocked(port: Int) throws {
        try? FileManager.default.removeItem(at: portFile)
        let child = try ChildProcess.start(
            Self.python,
            [Self.script, "--state-dir", directory.appending("state").path, "--port", String(port),
             "--port-file", portFile.path, "--exit-with-parent"],
            standardOutput: .discard, standardError: .append(logURL.path), ownProcessGroup: false)
        process = child
        let deadline = Date().addingTimeInterval(90)  // migrate and an RSA key on a loaded machine
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
        throw Failure(description: "serve.py gave no port within 90 s; log:\n\(logTail())")
    }

    private func terminateLocked() {
        guard let child = process else { return }
        process = nil
        _ = child.stop(grace: .seconds(5))
    }

    private func logTail() -> String {
        let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? "(no log)"
        return text.split(separator: "\n").suffix(20).joined(separator: "\n")
    }

    // MARK: Requests

    /// Status and JSON body of one request (`curl`-free: a blocking URLSession call).
    func request(_ url: URL, form: [String: String]? = nil) throws -> (status: Int, json: [String: Any]) {
        var request = URLRequest(url: url, timeoutInterval: 30)
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = AuthorizationServer.formEncode(form)
        }
        return try send(request)
    }

    private func send(_ request: URLRequest) throws -> (status: Int, json: [String: Any]) {
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

    /// Whether DOT's protected API (`/api/read`, scope "read") accepts `accessToken` now.
    func apiAccepts(_ accessToken: String) throws -> Bool {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/api/read")!, timeoutInterval: 30)
        request.setValue("Bearer " + accessToken, forHTTPHeaderField: "Authorization")
        return try send(request).status == 200
    }

    /// The test project's counters: authorization_code, refresh_token, refresh_token_ok, revocations.
    func stats() throws -> [String: Int] {
        let answer = try request(URL(string: "http://127.0.0.1:\(port)/__test/stats")!)
        guard answer.status == 200 else { throw Failure(description: "stats: HTTP \(answer.status)") }
        return answer.json.compactMapValues { ($0 as? NSNumber)?.intValue }
    }

    /// The lifetime of access tokens DOT issues from now on.
    func setAccessTokenLifetime(seconds: Int) throws {
        let answer = try request(URL(string: "http://127.0.0.1:\(port)/__test/access-ttl?seconds=\(seconds)")!)
        guard answer.status == 200 else { throw Failure(description: "access-ttl: HTTP \(answer.status)") }
    }

    /// Whether DOT still honours `refreshToken`: a refresh grant with it (which, when it is
    /// live, rotates it — so call this only on a token the test is done with).
    func refreshTokenIsRefused(_ refreshToken: String) throws -> Bool {
        let answer = try request(
            tokenURL, form: ["grant_type": "refresh_token", "refresh_token": refreshToken, "client_id": Self.clientID])
        return answer.status == 400 && (answer.json["error"] as? String) == "invalid_grant"
    }
}
