import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// crash_kill9: a child runs put / sign-in / rotate (refresh-token CAS) / logout (beginLogout +
/// recordRevocationAttempt) in a loop on one store; the parent SIGKILLs it at a random moment,
/// reopens the store and checks: `integrity_check` ok, every row opens, and the refresh token of
/// every account and the outbox are exactly what the acknowledged writes left — or that plus
/// the one write in flight (the kill may land between its commit and its ACK).
@Suite("Reliability: crash_kill9", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct CrashKill9Tests {
    /// What the store must hold: each account's refresh token and the outbox's tokens.
    struct Model: Equatable {
        var refreshTokens: [String: String] = [:]
        var outbox: Set<String> = []

        /// Applies one operation line ("put acct v", "signin acct v", "rotate acct v stored", "logout acct", "local acct", "revoke acct t").
        mutating func apply(_ words: [Substring]) {
            guard words.count >= 2 else { return }
            let account = String(words[1])
            switch words[0] {
            case "put":
                refreshTokens[account] = String(words[2])
            case "signin":
                if let old = refreshTokens[account], old != String(words[2]) { outbox.insert(old) }
                refreshTokens[account] = String(words[2])
            case "rotate":
                if words.count < 4 || words[3] == "stored" {
                    refreshTokens[account] = String(words[2])
                } else {
                    outbox.insert(String(words[2]))
                }
            case "logout":
                if let token = refreshTokens.removeValue(forKey: account) { outbox.insert(token) }
            case "revoke":
                outbox.remove(String(words[2]))
            default:
                break  // "local": deletes entries other than the refresh token
            }
        }
    }

    @Test("SIGKILL at random moments loses no acknowledged write and leaves every row readable")
    func crashKill9() throws {
        let seed = Reliability.seed("crash_kill9")
        let iterations = Int(ProcessInfo.processInfo.environment["CRASH_KILL9_ITERATIONS"] ?? "") ?? (Reliability.soak ? 10_000 : 500)
        var rng = SeededGenerator(seed: seed)
        let child = try Reliability.child()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let accounts = (0..<8).map { "acct-\($0)" }

        var model = Model()
        var integrityFailures = 0, lost = 0, badRows = 0, acknowledged = 0, inFlightCommitted = 0, killsBeforeReady = 0
        var childFailures = 0
        let started = Date()
        for iteration in 0..<iterations {
            let childSeed = seed &+ UInt64(iteration) &* 7919
            let process = try StreamingChild(child, ["crash-loop", path, String(childSeed)])
            if iteration > 0 && rng.next() % 10 == 0 {
                // Kill anywhere, the open included.
                usleep(useconds_t(rng.next() % 40_000))
                killsBeforeReady += 1
            } else {
                let ready = process.waitForLine(timeout: 30) { $0 == "READY" }
                if !ready {
                    process.kill9()
                    _ = try process.finish()
                    Issue.record("iteration \(iteration): the child never became ready: \(process.stderr)")
                    childFailures += 1
                    break
                }
                usleep(useconds_t(rng.next() % 60_000))
            }
            process.kill9()
            let lines = try process.finish()
            if !process.killedBySignal {
                childFailures += 1
                Issue.record("iteration \(iteration): the child exited by itself: \(process.stderr)")
            }

            // The model after every ACK, and the write in flight (BEGIN without ACK).
            var pending: [Substring]?
            for line in lines {
                let words = line.split(separator: " ")
                guard let tag = words.first else { continue }
                if tag == "BEGIN" {
                    pending = Array(words.dropFirst())
                } else if tag == "ACK" {
                    model.apply(Array(words.dropFirst()))
                    acknowledged += 1
                    pending = nil
                }
            }
            var withPending = model
            if let pending {
                // A rotate in flight is stored when committed (one writer: its CAS cannot lose).
                withPending.apply(pending.first == "rotate" ? pending + ["stored"] : pending)
            }

            let store = try TokenStore(path: path, appID: testAppID)
            let report = try store.verify()
            if report.integrityCheck != ["ok"] {
                integrityFailures += 1
                Issue.record("iteration \(iteration): integrity_check \(report.integrityCheck)")
            }
            if !report.badRows.isEmpty {
                badRows += report.badRows.count
                Issue.record("iteration \(iteration): rows that do not open: \(report.badRows)")
            }
            var actual = Model()
            for account in accounts {
                if let token = try store.refreshToken(account: AccountID(account))?.stringValue() { actual.refreshTokens[account] = token }
            }
            actual.outbox = Set(try store.pendingRevocations().compactMap { $0.refreshToken.stringValue() })
            store.close()
            if actual == model {
                // nothing in flight, or the in-flight write did not commit
            } else if actual == withPending {
                inFlightCommitted += 1
            } else {
                lost += 1
                Issue.record("""
                    iteration \(iteration) (seed \(seed)): the store does not match the acknowledged writes
                    expected \(model) or, with \(pending.map { $0.joined(separator: " ") } ?? "nothing") in flight, \(withPending)
                    found \(actual)
                    """)
            }
            model = actual
            if lost > 0 || integrityFailures > 0 { break }
        }
        let elapsed = Date().timeIntervalSince(started)
        Reliability.metric("crash_kill9", [
            "iterations": iterations, "seed": seed, "acknowledged_writes": acknowledged,
            "in_flight_committed": inFlightCommitted, "kills_before_ready": killsBeforeReady,
            "integrity_failures": integrityFailures, "bad_rows": badRows, "acknowledged_writes_lost": lost,
            "child_failures": childFailures, "seconds": String(format: "%.1f", elapsed),
        ])
        #expect(acknowledged > iterations, "the children did work between kills")
    }
}
