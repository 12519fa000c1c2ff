// tokenbench — TokenStore against libsecret-per-item and plaintext SQLite.
// `make bench` runs it release-built inside scripts/with-keyring; see BENCHMARKS.md.
import Foundation
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

let usage = """
    USAGE: tokenbench [--quick] [--server URL] [--output FILE] [--dir DIR] [--seed N] [--keep] [--session-only] [--open-only] [--get-only]

    Measures TokenStore, libsecret one-item-per-token and plaintext SQLite in one run and
    prints a Markdown table. Run it inside a Secret Service session (scripts/with-keyring);
    scripts/bench does that and starts the local authorization server.

    OPTIONS:
      --quick          small sizes and few iterations (a smoke test, < 60 s)
      --server URL     the local authorization server (logout and renewal figures)
      --output FILE    write the results into FILE (between the generated-section markers)
      --dir DIR        where the stores go (default: a new directory under $TMPDIR)
      --seed N         the seed of the random key choice (default: 1)
      --keep           keep the stores afterwards
      --session-only   only the session-layer figures (needs --server)
      --open-only      only TokenStore's cold opens at each size (writes nothing unless --output)
      --logout-keyring-sizes N,N,...
                       only a logout end to end (needs --server) with the keyring holding N
                       other items each: one METRIC bench_logout line per size (writes nothing)
      --revoke-delay-ms N
                       with --logout-keyring-sizes: the local server holds each revocation N ms
                       (a network round trip to a real authorization server)
      --get-only       only get, TokenStore's and plaintext SQLite's, at each size: one
                       METRIC bench_get line per size with their p50s and ratio (writes nothing)
      -h, --help       show this help

    Internal modes (the cold-open children): open-once PATH APPID INDEX,
    plaintext-open-once PATH INDEX, libsecret-lookup-once INDEX. Profiling (one operation
    in a loop, for callgrind): profile get|put|list|open SIZE ITERATIONS DIR. The TPM tier
    against the keyring tier (inside scripts/with-swtpm): tpm-open ITERATIONS DIR. A DPoP
    proof with the software key: dpop-proof ITERATIONS; with the TPM-resident key (inside
    scripts/with-swtpm): dpop-proof-tpm ITERATIONS. The store lock (inside scripts/with-keyring):
    lock ITERATIONS DIR. Opens through key slots (inside scripts/with-keyring): slot-open
    ITERATIONS DIR. The desktop session's lock (whenUnlocked; a dbusmock logind on a private
    system bus): session-lock ITERATIONS DIR.
    """

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
    exit(code)
}

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Error: \(message)\nHelp: tokenbench --help\n".utf8))
    exit(64)
}

/// The cold-open children: time inside the process, print `open_get_ns=N`.
func runChild(_ arguments: [String]) -> Never {
    let start = monotonicNanos()
    do {
        switch arguments.first {
        case "open-once":
            guard arguments.count == 4, let index = Int(arguments[3]) else { usageError("open-once PATH APPID INDEX") }
            let store = try TokenStore(path: arguments[1], appID: arguments[2])
            let key = ItemKey(account: AccountID(Workload.account(index), service: Workload.service), kind: .generic)
            guard let secret = try store.secret(for: key), secret.count == Workload.tokenBytes else {
                fail("open-once: the item is missing")
            }
            let elapsed = monotonicNanos() - start
            print("open_get_ns=\(elapsed)")
        case "plaintext-open-once":
            guard arguments.count == 3, let index = Int(arguments[2]) else { usageError("plaintext-open-once PATH INDEX") }
            let store = try PlaintextStore(path: arguments[1])
            guard try store.get(lookup: PlaintextStore.lookup(index))?.count == Workload.tokenBytes else {
                fail("plaintext-open-once: the item is missing")
            }
            let elapsed = monotonicNanos() - start
            print("open_get_ns=\(elapsed)")
        case "libsecret-lookup-once":
            guard arguments.count == 2, let index = Int(arguments[1]) else { usageError("libsecret-lookup-once INDEX") }
            let items = try LibsecretItems()
            guard try items.lookup(index: index)?.count == Workload.tokenBytes else {
                fail("libsecret-lookup-once: the item is missing")
            }
            let elapsed = monotonicNanos() - start
            print("open_get_ns=\(elapsed)")
        default:
            usageError("unknown mode")
        }
    } catch {
        fail("\(arguments[0]): \(error)")
    }
    exit(0)
}

struct Options {
    var quick = false
    var server: URL?
    var output: String?
    var directory: String?
    var seed: UInt64 = 1
    var keep = false
    var sessionOnly = false
    var openOnly = false
    var getOnly = false
    var logoutKeyringSizes: [Int] = []
    var revokeDelayMilliseconds = 0

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var rest = arguments[...]
        func value(_ name: String, _ inline: String?) -> String {
            if let inline { return inline }
            guard let next = rest.popFirst() else { usageError("\(name) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            let inline = parts.count == 2 ? parts[1] : nil
            switch name {
            case "-h", "--help":
                print(usage)
                exit(0)
            case "--quick": options.quick = true
            case "--keep": options.keep = true
            case "--session-only": options.sessionOnly = true
            case "--open-only": options.openOnly = true
            case "--get-only": options.getOnly = true
            case "--logout-keyring-sizes":
                let sizes = value(name, inline).split(separator: ",").compactMap { Int($0) }
                guard !sizes.isEmpty, sizes.allSatisfy({ $0 >= 0 }) else { usageError("--logout-keyring-sizes needs N,N,...") }
                options.logoutKeyringSizes = sizes
            case "--revoke-delay-ms":
                guard let delay = Int(value(name, inline)), (0...10_000).contains(delay) else { usageError("--revoke-delay-ms needs 0...10000") }
                options.revokeDelayMilliseconds = delay
            case "--server":
                guard let url = URL(string: value(name, inline)), url.scheme != nil else { usageError("--server needs a URL") }
                options.server = url
            case "--output": options.output = value(name, inline)
            case "--dir": options.directory = value(name, inline)
            case "--seed":
                guard let seed = UInt64(value(name, inline)) else { usageError("--seed needs a number") }
                options.seed = seed
            default: usageError("unknown argument '\(argument)'")
            }
        }
        return options
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
if let mode = arguments.first, ["open-once", "plaintext-open-once", "libsecret-lookup-once"].contains(mode) {
    runChild(arguments)
}
// The modes that run one measurement of their own (each prints its METRIC line).
let singleModes: [String: ([String]) throws -> Void] = [
    "tpm-open": TPMBench.run,
    "slot-open": SlotBench.run,
    "lock": LockBench.run,
    "session-lock": SessionLockBench.run,
    "dpop-proof": DPoPBench.run,
    "dpop-proof-tpm": DPoPBench.runTPM,
    "profile": Profile.run,
]
if let mode = arguments.first, let run = singleModes[mode] {
    do {
        try run(arguments)
    } catch {
        fail("\(mode): \(error)")
    }
    exit(0)
}
let options = Options.parse(arguments)
guard ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil else {
    fail("no D-Bus session bus: run inside scripts/with-keyring (scripts/bench does), never against your real keyring")
}

let plan = options.quick ? Plan.quick(seed: options.seed) : Plan.full(seed: options.seed)
let directory: String
if let chosen = options.directory {
    directory = chosen
} else {
    var template = Array(((ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/tokenbench.XXXXXX").utf8CString)
    guard mkdtemp(&template) != nil else { fail("cannot make a temporary directory") }
    directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

let environment = Environment.collect()
let runner = Runner(plan: plan, directory: directory)
runner.openOnly = options.openOnly
runner.results.openOnly = options.openOnly
runner.getOnly = options.getOnly
runner.results.loadBefore = Environment.loadAverage
Runner.log("\(plan.quick ? "quick" : "full") run in \(directory); load \(runner.results.loadBefore)")
let started = monotonicNanos()
do {
    if !options.logoutKeyringSizes.isEmpty {
        guard let server = options.server else { usageError("--logout-keyring-sizes needs --server") }
        try await LogoutKeyringBench(
            serverURL: server, directory: directory + "/logout", sizes: options.logoutKeyringSizes,
            iterations: plan.quick ? 5 : 20, revokeDelayMilliseconds: options.revokeDelayMilliseconds
        ).run()
        if !options.keep { try? FileManager.default.removeItem(atPath: directory) }
        exit(0)
    }
    if !options.sessionOnly { try runner.run() }
    if let server = options.server, !options.openOnly, !options.getOnly {
        Runner.log("session layer against \(server.absoluteString)")
        let bench = SessionBench(serverURL: server, directory: directory + "/session", iterations: plan.sessionIterations)
        do {
            runner.results.session = try await bench.run()
        } catch {
            var figures = SessionFigures()
            figures.note = "the session benchmark failed: \(error)"
            runner.results.session = figures
            Runner.log("session benchmark failed: \(error)")
        }
    }
} catch {
    if !options.keep { try? FileManager.default.removeItem(atPath: directory) }
    fail("\(error)")
}
runner.results.seconds = Double(monotonicNanos() - started) / 1e9
runner.results.loadAfter = Environment.loadAverage
if !options.keep { try? FileManager.default.removeItem(atPath: directory) }

if options.getOnly {
    // The get goal alone: p50 per size, ours against plaintext SQLite in the same run.
    for figures in runner.results.sizes {
        let ours = runner.results.p50(.tokenStore, .get, size: figures.size)
        let plain = runner.results.p50(.plaintext, .get, size: figures.size)
        print(String(format: "METRIC bench_get size=%d tokenstore_p50_us=%.1f plaintext_p50_us=%.1f ratio=%.2f", figures.size, ours / 1000, plain / 1000, ours / plain))
    }
    print("METRIC bench_get_load before=\"\(runner.results.loadBefore)\" after=\"\(runner.results.loadAfter)\"")
    exit(0)
}
let report = Report(results: runner.results, environment: environment, plan: plan)
print(report.markdown)
if let metric = report.openScalingMetric { print(metric) }
if let output = options.output {
    do {
        try report.write(to: output)
        Runner.log("wrote \(output)")
    } catch {
        fail("cannot write \(output): \(error)")
    }
}
