import Foundation
import TestTraits
import Testing
import TestSupport

/// `tokenctl login --device` (RFC 8628) through the binary against the real test server: no
/// browser anywhere; the test approves (or denies) the user code through the server's control
/// path while tokenctl polls, as the user would on another device.
@Suite("tokenctl login --device", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DeviceLoginCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    /// Runs `tokenctl <arguments>` in the background while `act` plays the user with the
    /// server's pending user code; the result once tokenctl exits.
    static func login(
        _ fixture: Fixture, _ arguments: [String], environment: [String: String] = [:],
        act: @escaping @Sendable (AuthorizationServer, String) throws -> Void
    ) async throws -> TokenctlResult {
        let server = fixture.server
        let run = Task { try fixture.store.run(arguments, environment: fixture.environment.merging(environment) { _, given in given }) }
        let deadline = ContinuousClock.now + .seconds(60)
        var userCode: String?
        while userCode == nil, ContinuousClock.now < deadline {
            let codes = try server.device()["codes"] as? [[String: Any]] ?? []
            userCode = codes.first { ($0["status"] as? String) == "pending" && !(($0["polls"] as? [Double]) ?? []).isEmpty }?["user_code"] as? String
            if userCode == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        try act(server, try #require(userCode, "tokenctl asked for no device code"))
        return try await run.value
    }

    @Test("the code and URL on stderr (a QR code with qrencode), approved while polling: exit 0, stored, state authorized")
    func approved() async throws {
        let fixture = try Fixture()
        let user = "000555.device.\(UUID().uuidString.prefix(8).lowercased())"
        let login = try await Self.login(fixture, ["login", "--device", "--account", "alice", "--scope", "openid read:items"]) {
            try $0.device(["approve": $1, "apple_id": user])
        }
        #expect(login.exitCode == 0, "\(login.standardError)")
        let codes = try fixture.server.device()["codes"] as? [[String: Any]] ?? []
        let userCode = try #require(codes.first?["user_code"] as? String)
        let base = fixture.server.issuer
        #expect(login.standardError.contains(
            "tokenctl: to sign in, open \(base)activate on any device and enter the code \(userCode)\n"), "\(login.standardError)")
        #expect(login.standardError.contains("tokenctl: or open \(base)activate?user_code=\(userCode)\n"))
        #expect(login.standardError.contains("(it is not a secret; it works only with this tokenctl)"))
        #expect(login.standardError.contains("tokenctl: waiting for the approval\n"))
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/qrencode") {
            #expect(login.standardError.contains("\u{2588}"), "a QR code drawn with block characters: \(login.standardError)")
        }
        #expect(login.standardOutput.contains("signed in"), "\(login.standardOutput)")
        #expect(login.standardOutput.contains(user))
        #expect(try fixture.run(["state", user]).standardOutput == "authorized\n")
        #expect(try fixture.server.counter("device_grants") == 1)
    }

    @Test("--json: the code still on stderr, no QR code; the result as login's JSON")
    func json() async throws {
        let fixture = try Fixture()
        let login = try await Self.login(fixture, ["--json", "login", "--device", "--account", "alice"]) { try $0.device(["approve": $1]) }
        #expect(login.exitCode == 0, "\(login.standardError)")
        #expect(login.standardError.contains("enter the code "))
        #expect(!login.standardError.contains("\u{2588}"), "no QR code with --json")
        #expect(!login.standardError.contains("waiting for the approval"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(login.standardOutput.utf8)) as? [String: Any])
        expectKeys(object, ["account", "service", "state", "expiresAt", "scopes", "declinedScopes", "userID", "subject"])
        #expect(object["state"] as? String == "authorized")
    }

    @Test("declined on the other device: exit 75, nothing stored; an expired code: exit 75")
    func declinedAndExpired() async throws {
        let fixture = try Fixture()
        let denied = try await Self.login(fixture, ["login", "--device", "--account", "alice"]) { try $0.device(["deny": $1]) }
        #expect(denied.exitCode == 75, "\(denied.standardError)")
        #expect(denied.standardError.contains("[authorizationFailed]"))
        #expect(denied.standardError.contains("tokenctl login --device"))
        let expired = try await Self.login(fixture, ["login", "--device", "--account", "alice"]) { try $0.device(["expire": $1]) }
        #expect(expired.exitCode == 75, "\(expired.standardError)")
        #expect(expired.standardError.contains("[timedOut]"))
        #expect(try fixture.json(["list"]).object["count"] as? Int == 0)
    }

    @Test("--device with --browser, --redirect-port or --apple-user-id is a usage error (64); a server without the grant is 78")
    func refused() throws {
        let fixture = try Fixture()
        for extra in [["--browser"], ["--redirect-port", "53180"], ["--apple-user-id", "x"], ["--timeout", "5"]] {
            let result = try fixture.run(["login", "--device", "--account", "alice"] + extra)
            #expect(result.exitCode == 64, "\(extra): \(result.standardError)")
        }
        try fixture.server.setProfile("okta")
        let okta = try fixture.store.run(
            ["login", "--device", "--account", "alice"],
            environment: ["TOKENCTL_ISSUER": fixture.server.baseURL.absoluteString + "/oauth2/default",
                          "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID])
        #expect(okta.exitCode == 78, "\(okta.standardError)")
        #expect(okta.standardError.contains("[unsupportedByServer]"))
    }
}

/// Debian's glewlwyd and Chromium are installed (scripts/install-deps installs both).
let glewlwydAndChromiumTrait = Testing.ConditionTrait.enabled(
    if: glewlwydInstalled && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "glewlwyd or chromium missing")

/// `tokenctl login --device` against Debian's glewlwyd 2.7.5 (Tests/Glewlwyd/serve.py): tokenctl
/// polls; the test reads the URL from tokenctl's stderr as a person reads the terminal, and opens
/// it in a browser "on another device" (headless Chromium, glewlwyd's own device page).
@Suite("tokenctl login --device against glewlwyd", tokenctlKeyringTrait, glewlwydAndChromiumTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct GlewlwydDeviceLoginCommandTests {
    @Test("the URL on stderr, approved in Chromium while tokenctl polls: exit 0, the account stored")
    func approvedInBrowser() async throws {
        let server = try GlewlwydServer()
        let store = try TokenctlStore()
        let stderr = store.directory.appending("login.stderr")
        var environment = TokenctlStore.keyringEnvironment
        let inherited = ProcessInfo.processInfo.environment
        environment["PATH"] = inherited["PATH"]
        environment["HOME"] = inherited["HOME"]
        environment["LANG"] = "C.UTF-8"
        let child = try ChildProcess.start(
            TokenctlBinary.url.path,
            ["--store", store.path, "--json", "login", "--device", "--issuer", server.issuer, "--client-id",
             GlewlwydServer.publicClientID, "--account", "alice", "--scope", "openid read"],
            environment: environment, standardOutput: .capture, standardError: .append(stderr.path))
        defer { _ = child.stop(grace: .seconds(2)) }
        // What a person reads on the terminal: "tokenctl: or open <verification_uri_complete>".
        var complete: URL?
        let deadline = ContinuousClock.now + .seconds(60)
        while complete == nil, ContinuousClock.now < deadline, child.isRunning {
            let text = (try? String(contentsOf: stderr, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tokenctl: or open ") }) {
                complete = URL(string: String(line.dropFirst("tokenctl: or open ".count)))
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let page = try #require(complete, "no verification URI on stderr: \((try? String(contentsOf: stderr, encoding: .utf8)) ?? "")")
        #expect(page.absoluteString.hasPrefix(server.issuer + "/device?code="))
        #expect(try await offPool { try server.openInBrowser(page) } == 0)
        let termination = try await offPool { try child.wait(timeout: .seconds(60)) }
        let output = String(decoding: child.captured("stdout"), as: UTF8.self)
        #expect(termination.succeeded, "\((try? String(contentsOf: stderr, encoding: .utf8)) ?? "")")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        #expect(object["state"] as? String == "authorized")
        #expect((object["scopes"] as? [String])?.contains("read") == true)
        let list = try store.json(["list"])
        #expect(list.object["count"] as? Int ?? 0 > 0)
    }
}
