import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// multiprocess: N processes run mixed operations on one store for a fixed time. Each keeps
/// a counter of its own (read, then write +1), bumps a shared counter held as a refresh token
/// through the compare-and-swap `replaceRefreshToken` (a lost CAS puts its token in the outbox),
/// appends log items, and reads. At the end every counter, the shared counter, the outbox and
/// the log must add up: no lost update, and no `databaseBusy` may escape the API.
@Suite("Reliability: multiprocess", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct MultiprocessTests {
    @Test("processes × mixed operations: no busy escapes, no lost update")
    func multiprocess() throws {
        let environment = ProcessInfo.processInfo.environment
        let processes = Int(environment["MULTIPROCESS_PROCESSES"] ?? "") ?? (Reliability.soak ? 16 : 4)
        let millis = Int(environment["MULTIPROCESS_MILLIS"] ?? "") ?? (Reliability.soak ? 600_000 : 20_000)
        let child = try Reliability.child()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        do {
            let store = try TokenStore(path: path, appID: testAppID)
            try store.ledger.saveSignIn(account: "shared", refreshToken: secret("0"), appleUserID: "user-shared", accessToken: nil)
        }

        let results = ConcurrentResults()
        runAllAtOnce(processes) { index in
            results.set(index, Result {
                try runChild(child, ["mp-worker", path, "p\(index)", String(millis)], timeout: TimeInterval(millis) / 1000 + 120)
            })
        }

        var latencies: [Int] = []
        var casStored = 0, casSuperseded = 0, busy = 0, errors = 0, lost = 0, totalOps = 0
        var logs: [String: Int] = [:], own: [String: Int] = [:]
        for index in 0..<processes {
            let result = try results.get(index).get()
            #expect(result.status == 0 && !result.signaled, "worker \(index): \(result.stderr)")
            let lines = result.stdout.split(separator: "\n")
            guard let summary = lines.first(where: { $0.hasPrefix("RESULT ") }),
                  let lat = lines.first(where: { $0.hasPrefix("LAT ") }) else {
                Issue.record("worker \(index) printed no result: \(result.stdout.prefix(500)) \(result.stderr)")
                continue
            }
            var fields: [String: String] = [:]
            for pair in summary.split(separator: " ").dropFirst() {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
            func int(_ name: String) -> Int { Int(fields[name] ?? "") ?? 0 }
            let id = fields["id"] ?? "?"
            own[id] = int("own")
            logs[id] = int("logs")
            casStored += int("cas_stored")
            casSuperseded += int("cas_superseded")
            busy += int("busy")
            errors += int("errors")
            if int("errors") > 0 || int("busy") > 0 { Issue.record("worker \(id): \(summary)") }
            let values = lat.dropFirst(4).split(separator: ",").compactMap { Int($0) }
            latencies += values
            totalOps += values.count
        }

        let store = try TokenStore(path: path, appID: testAppID)
        for (id, count) in own {
            let stored = try store.secret(for: key("counter-\(id)", .generic))?.stringValue().flatMap(Int.init) ?? 0
            if stored != count {
                lost += abs(count - stored)
                Issue.record("counter of \(id): stored \(stored), incremented \(count) times")
            }
            for n in 0..<(logs[id] ?? 0) where try store.secret(for: key("log-\(id)-\(n)", .generic))?.stringValue() != "log-\(id)-\(n)" {
                lost += 1
                Issue.record("log item \(id)-\(n) is missing or wrong")
            }
        }
        let logTotal = logs.values.reduce(0, +)
        let logItems = try store.items().filter { $0.key.account.name.hasPrefix("log-") }.count
        if logItems != logTotal { Issue.record("\(logItems) log items, \(logTotal) acknowledged") }
        lost += max(0, logTotal - logItems)
        let shared = try store.refreshToken(account: "shared")?.stringValue().flatMap(Int.init) ?? -1
        if shared != casStored {
            lost += abs(casStored - shared)
            Issue.record("shared counter \(shared), \(casStored) successful compare-and-swaps")
        }
        let outbox = try store.pendingRevocations().count
        if outbox != casSuperseded {
            lost += abs(casSuperseded - outbox)
            Issue.record("outbox holds \(outbox) entries, \(casSuperseded) compare-and-swaps were superseded")
        }
        let report = try store.verify()
        #expect(report.isHealthy, "\(report)")

        latencies.sort()
        let p99 = latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        let p50 = latencies.isEmpty ? 0 : latencies[latencies.count / 2]
        let seconds = Double(millis) / 1000
        Reliability.metric("multiprocess", [
            "processes": processes, "seconds": seconds, "ops": totalOps,
            "ops_per_s": String(format: "%.0f", Double(totalOps) / seconds),
            "p50_ms": String(format: "%.2f", Double(p50) / 1000), "p99_ms": String(format: "%.2f", Double(p99) / 1000),
            "max_ms": String(format: "%.1f", Double(latencies.last ?? 0) / 1000),
            "cas_stored": casStored, "cas_superseded": casSuperseded, "busy_escaped": busy, "other_errors": errors,
            "lost_updates": lost,
        ])
        #expect(busy == 0)
        #expect(errors == 0)
        #expect(lost == 0)
        #expect(totalOps > processes * 10, "the workers did work")
        #expect(casStored > 0)
    }
}
