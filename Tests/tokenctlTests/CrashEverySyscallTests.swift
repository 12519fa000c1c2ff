import Foundation
import TestTraits
import Testing
import TestSupport

/// crash_every_syscall (RELIABILITY.md): each operation of tokenctl is run once to count its
/// state-changing system calls in process-wide order (file writes, syncs, socket sends — D-Bus
/// and HTTP —, unlink, rename, truncate; Tests/CrashShim/crashshim.c, an LD_PRELOAD library),
/// then run again from the same starting state killed (SIGKILL) just before each counted call,
/// and the store is recovered as an app would (the next command, `resume --all`) and checked:
/// `verify` clean, no lost revocation (a token taken off the account is revoked at the server
/// or queued), no token readable for a user recorded revoked, every acknowledged write
/// readable, the next operation succeeds or says "sign in again".
///
/// `make soak` runs every point (`TOKENSTORE_CRASH_EVERY_SYSCALL=all`); `make test` a seeded
/// sample: every k-th point from a seeded offset, k sized so that each operation tries about
/// `TOKENSTORE_CRASH_SYSCALL_POINTS` points (default 6). `SEED=` replays a sample;
/// `TOKENSTORE_CRASH_OPERATIONS=renewal,logout` runs only those operations. Not under the
/// sanitizers: their runtimes must come first in the preload list (scripts/sanitizers), and the
/// uninstrumented `make test` runs it.
@Suite("crash_every_syscall: tokenctl killed at every state-changing system call", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct CrashEverySyscallTests {
    /// The compiled shim (once per test process), in the package's build folder.
    static let shim: Result<String, ShimError> = {
        do {
            let output = repositoryRoot.appendingPathComponent(".build/crashshim-\(getpid()).so").path
            let source = repositoryRoot.appendingPathComponent("Tests/CrashShim/crashshim.c").path
            let built = try PrivateKeyring.run("cc", ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", output, source, "-ldl"])
            guard built.status == 0 else { return .failure(ShimError(description: "cc failed: \(built)")) }
            return .success(output)
        } catch {
            return .failure(ShimError(description: "\(error)"))
        }
    }()

    struct ShimError: Error, CustomStringConvertible { let description: String }

    static var underSanitizer: Bool {
        let environment = ProcessInfo.processInfo.environment
        return ["ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"].contains { environment[$0] != nil }
    }

    /// Which points of `total` to try: all under soak, else every k-th from a seeded offset.
    static func points(total: Int, seed: UInt64) -> [Int] {
        guard total > 0 else { return [] }
        let environment = ProcessInfo.processInfo.environment
        if environment["TOKENSTORE_CRASH_EVERY_SYSCALL"] == "all" { return Array(1...total) }
        let budget = max(1, Int(environment["TOKENSTORE_CRASH_SYSCALL_POINTS"] ?? "") ?? 6)
        let every = max(1, (total + budget - 1) / budget)
        let offset = Int(seed % UInt64(every))
        return Array(stride(from: 1 + offset, through: total, by: every))
    }

    static var seed: UInt64 {
        if let given = ProcessInfo.processInfo.environment["SEED"].flatMap(UInt64.init) { return given }
        return UInt64.random(in: 1...UInt64(UInt32.max))
    }

    @Test("logout (online, offline), renewal with rotation (with and without a reuse interval), DPoP renewal, resume, key rotation, put, delete, first open: 0 violations")
    func everyOperation() throws {
        guard !Self.underSanitizer else {
            print("METRIC crash_every_syscall skipped=sanitizer (the uninstrumented make test runs it)")
            return
        }
        let shim = try Self.shim.get()
        let seed = Self.seed
        print("SEED=\(seed) (crash_every_syscall; rerun with SEED=\(seed))")
        let server = try AuthorizationServer()
        var totals = (points: 0, tried: 0, violations: 0, lost: 0)
        // TOKENSTORE_CRASH_OPERATIONS=renewal,logout runs only those (a soak split in parts).
        let only = ProcessInfo.processInfo.environment["TOKENSTORE_CRASH_OPERATIONS"].map { Set($0.split(separator: ",").map(String.init)) }
        for operation in CrashOperation.all where only?.contains(operation.name) ?? true {
            let harness = CrashHarness(server: server, shim: shim, operation: operation)
            let report = try harness.run(seed: seed)
            print(
                "METRIC crash_every_syscall op=\(operation.name) points=\(report.points) tried=\(report.tried) "
                    + "killed=\(report.killed) violations=\(report.violations.count) sessions_lost_in_rotation=\(report.sessionsLost)")
            for violation in report.violations.prefix(10) { Issue.record("\(operation.name): \(violation)") }
            #expect(report.points > 0, "\(operation.name): the counting run made no state-changing call")
            if operation.reuseInterval > 0 {
                #expect(report.sessionsLost == 0, "\(operation.name): with a reuse interval no session may be lost")
            }
            totals.points += report.points
            totals.tried += report.tried
            totals.violations += report.violations.count
            if operation.reuseInterval == 0 { totals.lost += report.sessionsLost }
        }
        print(
            "METRIC crash_every_syscall points=\(totals.points) tried=\(totals.tried) violations=\(totals.violations) "
                + "sessions_lost_in_rotation=\(totals.lost) seed=\(seed)")
        #expect(totals.violations == 0)
    }
}
