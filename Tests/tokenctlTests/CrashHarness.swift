import Foundation
import Testing
import TestSupport

/// One point of a crash run: a fresh store (and a fresh user at the shared server), brought to
/// the operation's starting state, then the operation run under the shim.
final class CrashCase {
    let store: TokenctlStore
    let server: AuthorizationServer
    let userID = "000111.\(UUID().uuidString.prefix(12).lowercased()).crash"
    /// The account's refresh token before the operation, when it has one.
    var refreshToken: String?
    /// The server's successful refresh grants before the operation.
    var refreshGrantsBefore = 0
    /// Items acknowledged before the operation: account → value.
    var acknowledged: [String: String] = [:]

    init(server: AuthorizationServer) throws {
        self.server = server
        store = try TokenctlStore()
    }

    var environment: [String: String] {
        ["TOKENCTL_DOMAIN": server.baseURL.absoluteString, "TOKENCTL_CLIENT_ID": AuthorizationServer.publicClientID]
    }

    func run(_ arguments: [String], stdin: String? = nil, extra: [String: String] = [:]) throws -> TokenctlResult {
        try store.run(arguments, stdin: stdin, environment: environment.merging(extra) { _, new in new })
    }

    /// Signs `alice` in (with `--dpop` when asked) and remembers her refresh token.
    func signIn(dpop: Bool = false) throws {
        let code = try server.appleAuthorizationCode(for: userID)
        let login = try run(["login", "--account", "alice", "--apple-user-id", userID] + (dpop ? ["--dpop"] : []), stdin: code)
        guard login.exitCode == 0 else { throw CrashSetupError("login: \(login.standardError)") }
        refreshToken = try secret("alice", kind: "refresh-token")
    }

    func put(_ account: String, _ value: String) throws {
        let put = try run(["put", "--account", account, "--kind", "generic"], stdin: value)
        guard put.exitCode == 0 else { throw CrashSetupError("put: \(put.standardError)") }
        acknowledged[account] = value
    }

    /// The secret stored for `account` and `kind`, or nil when there is none.
    func secret(_ account: String, kind: String = "generic") throws -> String? {
        let get = try run(["get", "--account", account, "--kind", kind, "--raw"])
        return get.exitCode == 0 ? get.standardOutput : nil
    }

    /// Runs `arguments` under the shim, killed before counted call `crashAt` (0: never).
    func runOperation(_ arguments: [String], stdin: String?, shim: String, crashAt: Int) throws -> CrashOutcome {
        let counter = store.directory.appending("crash-counter").path
        let result = try run(
            arguments, stdin: stdin,
            extra: ["LD_PRELOAD": shim, "TOKENSTORE_CRASH_COUNTER": counter, "TOKENSTORE_CRASH_AT": String(crashAt)])
        let bytes = (try? Data(contentsOf: URL(fileURLWithPath: counter))) ?? Data()
        let count = bytes.count == 8 ? bytes.withUnsafeBytes { Int(Int64(littleEndian: $0.loadUnaligned(as: Int64.self))) } : -1
        return CrashOutcome(result: result, count: count, killed: result.exitCode == 128 + SIGKILL)
    }
}

struct CrashOutcome {
    let result: TokenctlResult
    /// The calls counted (up to the one it died before).
    let count: Int
    let killed: Bool
}

struct CrashSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the checks after a point found.
struct CrashFindings {
    var violations: [String] = []
    var sessionLost = false

    mutating func require(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { violations.append(what()) }
    }
}

/// One operation of the crash matrix: its starting state, its command, the checks after it.
struct CrashOperation: Sendable {
    let name: String
    /// The server's reuse interval during the run (Auth0's; 0: none).
    var reuseInterval: Double = 0
    let setup: @Sendable (CrashCase) throws -> Void
    let arguments: [String]
    var stdin: String?
    /// Faults the server answers with while the operation runs (an offline logout).
    var offline = false
    let check: @Sendable (CrashCase, CrashOutcome, inout CrashFindings) throws -> Void
}

/// Runs one operation at every sampled point.
struct CrashHarness {
    let server: AuthorizationServer
    let shim: String
    let operation: CrashOperation

    struct Report {
        var points = 0
        var tried = 0
        var killed = 0
        var sessionsLost = 0
        var violations: [String] = []
    }

    func run(seed: UInt64) throws -> Report {
        try server.configure(reuseInterval: operation.reuseInterval)
        defer {
            try? server.configure(reuseInterval: 0)
            try? server.clearFaults()
        }
        var report = Report()
        let counting = try prepared()
        let first = try runOperation(counting, crashAt: 0)
        report.points = first.count
        var findings = CrashFindings()
        try operation.check(counting, first, &findings)
        report.violations += findings.violations.map { "the run that was not killed: \($0)" }
        for point in CrashEverySyscallTests.points(total: first.count, seed: seed) {
            let point = point
            let crash = try prepared()
            let outcome = try runOperation(crash, crashAt: point)
            report.tried += 1
            if outcome.killed { report.killed += 1 }
            var findings = CrashFindings()
            try operation.check(crash, outcome, &findings)
            if findings.sessionLost { report.sessionsLost += 1 }
            report.violations += findings.violations.map { "killed at call \(point) of \(first.count): \($0)" }
        }
        return report
    }

    private func prepared() throws -> CrashCase {
        let crash = try CrashCase(server: server)
        try operation.setup(crash)
        crash.refreshGrantsBefore = try server.stats().refreshGrants
        return crash
    }

    private func runOperation(_ crash: CrashCase, crashAt: Int) throws -> CrashOutcome {
        if operation.offline { try server.inject(.drop(.reset, path: "/oauth/revoke", count: 10_000)) }
        defer { if operation.offline { try? server.clearFaults() } }
        return try crash.runOperation(operation.arguments, stdin: operation.stdin, shim: shim, crashAt: crashAt)
    }
}
