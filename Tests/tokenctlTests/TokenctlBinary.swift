import Foundation
import TestSupport
import Testing

/// What one run of the tokenctl binary produced.
struct TokenctlResult: Sendable {
    let exitCode: Int32
    let standardOutput: String
    let standardError: String
}

/// The built `tokenctl` executable, run as a user would run it.
///
/// SwiftPM cannot link an executable target into a test on Linux, so the tests run the
/// binary that `swift build`/`swift test` put next to the test bundle. Set `TOKENCTL_BINARY`
/// to test another build.
enum TokenctlBinary {
    /// The executable, found in this order: `$TOKENCTL_BINARY`; next to the test bundle
    /// (`Bundle.main` on Linux, the `.xctest` bundle on macOS); next to the test runner;
    /// `<package>/.build/debug`.
    static let url: URL = {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [URL] = []
        if let override = environment["TOKENCTL_BINARY"], !override.isEmpty {
            candidates.append(URL(fileURLWithPath: override))
        }
        candidates.append(Bundle.main.bundleURL.appendingPathComponent("tokenctl"))
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("tokenctl"))
        }
        if let runner = CommandLine.arguments.first {
            let runnerURL = URL(fileURLWithPath: runner).resolvingSymlinksInPath()
            candidates.append(runnerURL.deletingLastPathComponent().appendingPathComponent("tokenctl"))
        }
        candidates.append(repositoryRoot.appendingPathComponent(".build/debug/tokenctl"))
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            fatalError("tokenctl not built; looked at: \(candidates.map(\.path)). Run 'swift build' first.")
        }
        return found
    }()

    /// The environment of a tokenctl child: `PATH`, `HOME`, `LANG=C.UTF-8`, sanitizer options
    /// (`ASAN_*`, `LSAN_*`, `UBSAN_*`, `TSAN_*`), then `environment`.
    static func environment(_ environment: [String: String]) -> [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var base = ["LANG": "C.UTF-8"]
        base["PATH"] = inherited["PATH"]
        base["HOME"] = inherited["HOME"]
        // Sanitizer settings reach the child too (scripts/sanitizers runs it instrumented).
        for (name, value) in inherited where ["ASAN_", "LSAN_", "UBSAN_", "TSAN_"].contains(where: name.hasPrefix) {
            base[name] = value
        }
        return base.merging(environment) { _, given in given }
    }

    /// Runs tokenctl with `arguments` and waits for it (at most `timeout`: past it the child
    /// is killed and ``ChildProcess/TimedOut``, naming the command, is thrown).
    ///
    /// The environment is minimal and predictable: `PATH`, `HOME`, `LANG=C.UTF-8`, sanitizer
    /// options (`ASAN_*`, `LSAN_*`, `UBSAN_*`, `TSAN_*`), then
    /// `environment`; no `TOKENCTL_*` variable leaks in from the shell running the tests.
    /// stdin is `stdin` or empty; stdout and stderr go to files, so a large output cannot
    /// block on a full pipe.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
        timeout: Duration = .seconds(120)
    ) throws -> TokenctlResult {
        let result = try ChildProcess.run(
            url.path, arguments, environment: Self.environment(environment), input: Data((stdin ?? "").utf8),
            timeout: timeout)
        return TokenctlResult(
            exitCode: result.termination.shellStatus, standardOutput: result.standardOutputText,
            standardError: result.standardErrorText)
    }
}

// MARK: - A store in a temporary directory, driven through the binary

/// Keyring-backed tokenctl tests run only inside scripts/with-keyring (make test always does).
let tokenctlKeyringTrait = Testing.ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable, Comment(rawValue: PrivateKeyring.skipReason))

/// A unique secret whose appearance in any output is a leak.
func makeCanary() -> String { "canary-\(UUID().uuidString)-secret" }

/// One test's store: a fresh temporary directory, `--store PATH`, and the session bus of the
/// private keyring passed to the child (TokenctlBinary.run starts from a minimal environment).
struct TokenctlStore {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "tokenctl-test")
        path = directory.appending("store/tokens.sqlite").path
    }

    /// The environment the private keyring needs: its session bus.
    static var keyringEnvironment: [String: String] {
        var environment: [String: String] = [:]
        let inherited = ProcessInfo.processInfo.environment
        for name in ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"] { environment[name] = inherited[name] }
        return environment
    }

    /// Runs `tokenctl --store PATH <arguments>`.
    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> TokenctlResult {
        try TokenctlBinary.run(
            ["--store", path] + arguments, environment: Self.keyringEnvironment.merging(environment) { _, given in given },
            stdin: stdin)
    }

    /// Runs `tokenctl --store PATH --json <arguments>` and parses stdout as one JSON object.
    func json(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (result: TokenctlResult, object: [String: Any]) {
        let result = try run(["--json"] + arguments, stdin: stdin, environment: environment)
        let parsed = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
        guard let object = parsed as? [String: Any] else {
            if parsed == nil {
                Issue.record(
                    "not JSON (exit \(result.exitCode)): \(result.standardOutput)\n--- stderr\n\(result.standardError)",
                    sourceLocation: sourceLocation)
                return (result, [:])
            }
            Issue.record("not a JSON object: \(result.standardOutput)", sourceLocation: sourceLocation)
            return (result, [:])
        }
        return (result, object)
    }

    /// Stores `secret` as a generic item of `account` through `tokenctl put`.
    func put(_ secret: String, account: String = "alice", kind: String = "generic") throws {
        let result = try run(["put", "--account", account, "--kind", kind], stdin: secret + "\n")
        guard result.exitCode == 0 else {
            throw PrivateKeyringError("tokenctl put failed (\(result.exitCode)): \(result.standardError)")
        }
    }

    /// Runs the `sqlite3` shell on the database.
    func sqlite(_ sql: String) throws -> String {
        let result = try PrivateKeyring.run("sqlite3", [path, sql])
        guard result.status == 0 else { throw PrivateKeyringError("sqlite3 failed: \(result)") }
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Asserts that a JSON object has exactly `keys`.
func expectKeys(
    _ object: [String: Any], _ keys: Set<String>, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(Set(object.keys) == keys, "keys: \(object.keys.sorted())", sourceLocation: sourceLocation)
}
