import Foundation
import Testing
import TestSupport

/// New-user trial 2: Ctrl-C during an offline logout, after the refresh token moved to the
/// outbox, left the account's user id, ID token and profile, the user `authorized` with no
/// history row, and `accounts` showing nothing under way, until the next logout or resume.
extension SessionCommandTests {
    /// `tokenctl --store PATH <arguments>` started with the session's environment and `extra`.
    private func startTokenctl(_ fixture: Fixture, _ arguments: [String], extra: [String: String]) throws -> ChildProcess {
        var environment = ["LANG": "C.UTF-8", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        environment["HOME"] = ProcessInfo.processInfo.environment["HOME"]
        environment.merge(TokenctlStore.keyringEnvironment) { _, new in new }
        environment.merge(fixture.environment) { _, new in new }
        environment.merge(extra) { _, new in new }
        return try ChildProcess.start(TokenctlBinary.url.path, ["--store", fixture.store.path] + arguments, environment: environment)
    }

    private func account(_ name: String, in fixture: Fixture) throws -> [String: Any]? {
        let accounts = try fixture.json(["accounts"]).object["accounts"] as? [[String: Any]] ?? []
        return accounts.first { $0["account"] as? String == name }
    }

    @Test("SIGINT in an offline logout after its first step: accounts shows it logging out; a writing open 2 min later finishes it; resume revokes")
    func interruptedOfflineLogout() throws {
        let fixture = try Fixture()
        let user = "000688.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: user).exitCode == 0)
        #expect(try fixture.login(account: "bob", userID: "000699.\(UUID().uuidString.prefix(8)).apple").exitCode == 0)
        let refreshToken = try #require(
            try fixture.store.json(["get", "--account", "alice", "--kind", "refresh-token", "--reveal"]).object["secret"] as? String)
        #expect(try fixture.store.run(["profile", "--account", "alice"]).exitCode == 0, "the sign-in stored a profile")

        // The server is down; the logout stops right after its first step, and gets Ctrl-C there.
        fixture.server.stopTemporarily()
        let logout = try startTokenctl(fixture, ["logout", "--account", "alice"], extra: ["TOKENSTORE_STOP_POINT": "logout.afterBegin"])
        let deadline = ContinuousClock.now + .seconds(60)
        while !String(decoding: logout.captured("stderr"), as: UTF8.self).contains("stop point reached: logout.afterBegin"),
            logout.isRunning, ContinuousClock.now < deadline
        {
            usleep(20_000)
        }
        logout.signal(SIGINT)
        logout.signal(SIGCONT)
        #expect(try logout.wait(timeout: .seconds(30)).shellStatus == 130)

        // What the trial saw, now told: alice is logging out and cannot renew; bob is untouched.
        let alice = try #require(try account("alice", in: fixture))
        #expect(alice["loggingOut"] as? Bool == true && alice["canRenew"] as? Bool == false, "\(alice)")
        #expect(alice["state"] as? String == "authorized")
        let bob = try #require(try account("bob", in: fixture))
        #expect(bob["loggingOut"] as? Bool == false && bob["canRenew"] as? Bool == true, "\(bob)")
        let text = try fixture.run(["accounts"]).standardOutput.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(text.first == ["SERVICE", "ACCOUNT", "USER", "ID", "CAN", "RENEW", "LOGGING", "OUT", "STATE", "AUDIENCES"], "\(text)")
        #expect(text.first { $0.contains("alice") }?.dropFirst(3).prefix(3) == ["no", "yes", "authorized"], "\(text)")
        #expect(text.first { $0.contains("bob") }?.dropFirst(3).prefix(3) == ["yes", "no", "authorized"], "\(text)")
        #expect(try fixture.run(["token", "--account", "alice"]).exitCode == 1, "no token is offered while logging out")

        // A writing command right away leaves it: another process may still be waiting for the server.
        #expect(try fixture.store.run(["put", "--account", "carol", "--kind", "generic"], stdin: "x\n").exitCode == 0)
        #expect(try account("alice", in: fixture)?["loggingOut"] as? Bool == true)

        // Two minutes later (the mark's time moved back: it is outside the mark's MAC)...
        _ = try fixture.store.sqlite("UPDATE account_marks SET updated_at = updated_at - 180000")
        // ...a command that only reads still changes nothing,
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.store.path))
        #expect(try account("alice", in: fixture)?["loggingOut"] as? Bool == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.store.path)) == before)
        // and the next one that writes finishes the local part as an offline logout would have.
        let put = try fixture.store.run(["put", "--account", "carol", "--kind", "generic"], stdin: "y\n")
        #expect(put.exitCode == 0, "\(put.standardError)")
        #expect(try account("alice", in: fixture) == nil, "alice's user id, ID token, profile and cache are gone")
        for kind in ["apple-user-id", "id-token", "profile", "refresh-token"] {
            #expect(try fixture.store.run(["get", "--account", "alice", "--kind", kind]).exitCode == 1, "\(kind) left")
        }
        #expect(try fixture.run(["state", user]).standardOutput == "revoked\n")
        let last = (try fixture.json(["history", user]).object["transitions"] as? [[String: Any]])?.last ?? [:]
        #expect(last["reason"] as? String == "userLogout" && last["detail"] as? String == "remoteRevocationPending", "\(last)")
        #expect(try account("bob", in: fixture)?["canRenew"] as? Bool == true)
        let pending = try fixture.json(["pending"])
        #expect(pending.object["count"] as? Int == 1, "the token still waits in the outbox")

        // The server back: resume revokes it.
        try fixture.server.restart()
        #expect(try fixture.server.introspect(refreshToken).active)
        let resume = try fixture.json(["resume", "--all"])
        #expect(resume.result.exitCode == 0, "\(resume.result.standardError)")
        #expect(resume.object["revoked"] as? Int == 1)
        #expect(try fixture.server.introspect(refreshToken).active == false)
        let confirmed = (try fixture.json(["history", user]).object["transitions"] as? [[String: Any]])?.last ?? [:]
        #expect(confirmed["reason"] as? String == "revocationConfirmed", "\(confirmed)")
    }
}
