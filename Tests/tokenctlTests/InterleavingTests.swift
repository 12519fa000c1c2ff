import Foundation
import TestTraits
import Testing
import TestSupport

/// interleavings (RELIABILITY.md): two tokenctl processes on one store, scheduled at the stop
/// points compiled into debug builds (`TOKENSTORE_STOP_POINT`: the process stops itself there
/// with SIGSTOP) as the scheduler's yield points. For each pair of operations, every schedule
/// (A stopped at point a; B run until it stops at point b, ends, or is blocked by A; then A
/// resumed — or killed — and B resumed — or killed —) is run from a fresh store and checked with
/// the crash harness's invariants (verify clean, no lost revocation, no token for a revoked
/// user, the next operation succeeds or says sign in again) plus the pair's own: a logout that
/// returned leaves the account signed out and no refresh token of its user active at the server
/// after `resume --all`; two renewals never trip the server's reuse detection.
///
/// A schedule is a string (`pair/a/b/order`); a failure prints it and `TOKENSTORE_INTERLEAVING=`
/// replays exactly that one. `make soak` (`TOKENSTORE_INTERLEAVINGS=all`) runs every schedule;
/// `make test` a seeded sample of about `TOKENSTORE_INTERLEAVING_SAMPLES` (default 16).
@Suite("interleavings: two processes at every pair of stop points", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct InterleavingTests {
    @Test("logout × renewal, renewal × renewal, key rotation × logout, sign-in × logout, key rotation × renewal: 0 violations")
    func everySchedule() throws {
        #if DEBUG
        let environment = ProcessInfo.processInfo.environment
        let all = Interleaving.allSchedules()
        var chosen = all
        if let one = environment["TOKENSTORE_INTERLEAVING"], !one.isEmpty {
            chosen = all.filter { $0.name == one }
            try #require(!chosen.isEmpty, "no schedule named \(one)")
        } else if environment["TOKENSTORE_INTERLEAVINGS"] != "all" {
            let seed = environment["SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
            print("SEED=\(seed) (interleavings; rerun with SEED=\(seed))")
            let budget = max(1, Int(environment["TOKENSTORE_INTERLEAVING_SAMPLES"] ?? "") ?? 16)
            let every = max(1, (all.count + budget - 1) / budget)
            chosen = stride(from: Int(seed % UInt64(every)), to: all.count, by: every).map { all[$0] }
        }
        let server = try AuthorizationServer()
        var violations: [String] = []
        var blocked = 0
        for schedule in chosen {
            let outcome = try schedule.run(server: server)
            if outcome.bWasBlocked { blocked += 1 }
            for violation in outcome.violations {
                violations.append("\(schedule.name): \(violation)")
                Issue.record("schedule \(schedule.name) (replay with TOKENSTORE_INTERLEAVING=\(schedule.name)): \(violation)")
            }
        }
        print("METRIC interleavings schedules=\(all.count) explored=\(chosen.count) b_blocked_by_a=\(blocked) violations=\(violations.count)")
        #expect(violations.isEmpty)
        #else
        print("METRIC interleavings skipped=release_build (stop points are compiled into debug builds only)")
        #endif
    }
}

/// One schedule of two operations.
struct Interleaving {
    /// What a process does, and where it may be stopped.
    struct Step: Sendable {
        let name: String
        let points: [String]
        let arguments: @Sendable (CrashCase) throws -> (arguments: [String], stdin: String?)
    }

    enum Ending: String, CaseIterable {
        /// A resumed, then B resumed.
        case both
        /// A killed at its point, B resumed.
        case killA
        /// A resumed, B killed at its point.
        case killB
    }

    let pair: String
    let a: Step
    let b: Step
    let pointA: String
    /// B's point, or `end` (B runs to its end, or until A blocks it).
    let pointB: String
    let ending: Ending
    let setup: (CrashCase) throws -> Void
    let extraCheck: (CrashCase, TokenctlResult, TokenctlResult, inout CrashFindings) throws -> Void

    var name: String { "\(pair)/\(pointA)/\(pointB)/\(ending.rawValue)" }

    /// A renewal killed after the server rotated its refresh token and before its commit leaves
    /// the store with the rotated-out token: a second renewal presents it again. That is the
    /// session lost in a rotation the crash harness counts (`sessions_lost_in_rotation`), and
    /// what a server's reuse interval exists for, so these schedules run with the test server's
    /// (60 s, as Auth0's): the other renewal must then succeed without a reuse detection. Not
    /// for a logout as B: its check is that no token of the user stays active at the server.
    var needsReuseInterval: Bool {
        a.name == "renewal" && pointA == "renewal.afterServerAnswer" && ending == .killA && b.name != "logout"
    }

    struct Outcome {
        var violations: [String] = []
        var bWasBlocked = false
    }

    // MARK: The pairs

    static let logout = Step(name: "logout", points: ["logout.afterBegin", "logout.afterRevoke", "logout.afterRecord"]) { _ in
        (["logout", "--account", "alice"], nil)
    }
    static let renewal = Step(
        name: "renewal", points: ["renewal.beforeRequest", "renewal.afterServerAnswer", "renewal.afterCommit"]
    ) { _ in (["token", "--account", "alice", "--force"], nil) }
    static let rotation = Step(
        name: "rotation", points: ["rotate.afterNewKey", "rotate.afterBatch", "rotate.afterSwitch", "rotate.afterOldKeyDeleted"]
    ) { _ in (["rotate-key"], nil) }
    static let signIn = Step(name: "signin", points: ["signIn.beforeSave"]) { crash in
        (["login", "--account", "alice", "--apple-user-id", crash.userID, "--allow-user-change"],
         try crash.server.appleAuthorizationCode(for: crash.userID))
    }

    static func allSchedules() -> [Interleaving] {
        let signedIn: (CrashCase) throws -> Void = { try $0.signIn() }
        let pairs: [(String, Step, Step, (CrashCase, TokenctlResult, TokenctlResult, inout CrashFindings) throws -> Void)] = [
            ("logout-renewal", logout, renewal, logoutHolds),
            ("renewal-logout", renewal, logout, { crash, a, b, findings in try logoutHolds(crash, b, a, &findings) }),
            ("renewal-renewal", renewal, renewal, noReuse),
            ("rotation-logout", rotation, logout, { crash, a, b, findings in try logoutHolds(crash, b, a, &findings) }),
            ("logout-rotation", logout, rotation, logoutHolds),
            ("signin-logout", signIn, logout, { _, _, _, _ in }),
            ("logout-signin", logout, signIn, { _, _, _, _ in }),
            ("rotation-renewal", rotation, renewal, noReuse),
            ("renewal-rotation", renewal, rotation, noReuse),
        ]
        var schedules: [Interleaving] = []
        for (pair, a, b, check) in pairs {
            for pointA in a.points {
                for pointB in b.points + ["end"] {
                    for ending in Ending.allCases where !(ending == .killB && pointB == "end") {
                        schedules.append(Interleaving(
                            pair: pair, a: a, b: b, pointA: pointA, pointB: pointB, ending: ending, setup: signedIn,
                            extraCheck: check))
                    }
                }
            }
        }
        return schedules
    }

    /// A logout that returned (revoked, pending or failed) leaves the account signed out, and
    /// after `resume --all` no refresh token of its user active at the server.
    static func logoutHolds(_ crash: CrashCase, _ logout: TokenctlResult, _ other: TokenctlResult, _ findings: inout CrashFindings) throws {
        guard [0, 75, 1].contains(logout.exitCode), !logout.standardError.contains("interactionRequired") else { return }
        _ = try crash.run(["resume", "--all"])
        findings.require(try crash.secret("alice", kind: "refresh-token") == nil, "the account has a refresh token after its logout returned")
        let token = try crash.run(["token", "--account", "alice", "--force"])
        findings.require(token.exitCode != 0, "a token was obtained after the logout returned")
        findings.require(try crash.server.stats().activeRefreshTokens == 0, "a refresh token of the user is still active at the server")
    }

    /// Two renewals (single flight, or beside a key rotation) never present a rotated token.
    static func noReuse(_ crash: CrashCase, _ a: TokenctlResult, _ b: TokenctlResult, _ findings: inout CrashFindings) throws {
        findings.require(try crash.server.stats().reuseDetections == 0, "the server saw a rotated refresh token again")
    }
}

// MARK: Running one schedule

extension Interleaving {
    /// What a process did while the other ran.
    enum Progress { case stopped, ended, blocked }

    func run(server: AuthorizationServer) throws -> Outcome {
        try server.reset()
        if needsReuseInterval { try server.configure(reuseInterval: 60) }
        let crash = try CrashCase(server: server)
        try setup(crash)
        var outcome = Outcome()
        let (argumentsA, stdinA) = try a.arguments(crash)
        let processA = try crash.start(argumentsA, stdin: stdinA, stopAt: pointA)
        defer { processA.signal(SIGCONT); _ = processA.stop() }
        guard Self.wait(for: processA, within: .seconds(60)) == .stopped else {
            outcome.violations.append("A (\(a.name)) never reached \(pointA): \(processA.stderr)")
            return outcome
        }
        let (argumentsB, stdinB) = try b.arguments(crash)
        let processB = try crash.start(argumentsB, stdin: stdinB, stopAt: pointB == "end" ? nil : pointB)
        defer { processB.signal(SIGCONT); _ = processB.stop() }
        // B runs while A is stopped: until its own point, its end, or a lock A holds.
        var progressB = Self.wait(for: processB, within: .seconds(3))
        outcome.bWasBlocked = progressB == .blocked
        processA.signal(ending == .killA ? SIGKILL : SIGCONT)
        let resultA = try Self.result(of: processA)
        if progressB == .blocked { progressB = Self.wait(for: processB, within: .seconds(60)) }
        processB.signal(ending == .killB && progressB == .stopped ? SIGKILL : SIGCONT)
        let resultB = try Self.result(of: processB)

        var findings = CrashFindings()
        _ = try crash.run(["resume", "--all"])
        try CrashOperation.verifyClean(crash, &findings)
        try CrashOperation.noLostRevocation(crash, &findings)
        try CrashOperation.noTokenForARevokedUser(crash, &findings)
        try extraCheck(crash, resultA, resultB, &findings)
        try CrashOperation.nextOperation(crash, &findings)
        outcome.violations += findings.violations.map {
            "\($0) (A exit \(resultA.exitCode), B exit \(resultB.exitCode) \(resultB.standardError.suffix(200)))"
        }
        return outcome
    }

    /// Waits until `process` stops at its point (it says so, and is stopped), ends, or `within` passes.
    static func wait(for process: ChildProcess, within limit: Duration) -> Progress {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if !process.isRunning { return .ended }
            if process.stderr.contains("stop point reached"), isStopped(process.pid) { return .stopped }
            usleep(10_000)
        }
        return .blocked
    }

    static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].dropFirst().first == "T"
    }

    static func result(of process: ChildProcess) throws -> TokenctlResult {
        let termination = try process.wait(timeout: .seconds(120))
        return TokenctlResult(
            exitCode: termination.shellStatus, standardOutput: String(decoding: process.captured("stdout"), as: UTF8.self),
            standardError: process.stderr)
    }
}

extension ChildProcess {
    var stderr: String { String(decoding: captured("stderr"), as: UTF8.self) }
}

extension CrashCase {
    /// Starts tokenctl on this store, stopping itself at `stopAt` when given (debug builds).
    func start(_ arguments: [String], stdin: String?, stopAt: String?) throws -> ChildProcess {
        var extra = TokenctlStore.keyringEnvironment.merging(environment) { _, given in given }
        if let stopAt { extra["TOKENSTORE_STOP_POINT"] = stopAt }
        return try ChildProcess.start(
            TokenctlBinary.url.path, ["--store", store.path] + arguments, environment: TokenctlBinary.environment(extra),
            input: Data((stdin ?? "").utf8))
    }
}
