import Foundation
import TestSupport
import Testing

/// Rules that keep the test suite from hanging (a CI run that hangs lands nothing):
/// every suite has a time limit, and no code starts a program through `Foundation.Process`,
/// whose exit can go unnoticed on Linux (see `ChildProcess`).
@Suite(.timeLimit(.minutes(TestTimeLimit.minutes))) struct TestSuiteHygieneTests {
    /// Every Swift file under `folder`, with its text.
    static func swiftFiles(under folder: String) throws -> [(path: String, text: String)] {
        let root = repositoryRoot.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
        return try walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map {
            ("\(folder)/\($0)", try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8))
        }
    }

    /// Code lines only: `//` comments and `///` doc comments dropped.
    static func codeLines(_ text: String) -> [Substring] {
        text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
    }

    /// The sign-in suites (a `signIn(… redirectURIs: …)` or the listener itself) and the
    /// executor's own suite run in the sign-in pass of scripts/run-tests and scripts/sanitizers,
    /// where no long synchronous test holds the cooperative pool: the library no longer blocks a
    /// pool thread (``theSessionsAsyncCodeAwaitsTheStore()``), the test suite's synchronous tests
    /// still do, and one pass timed DiscoveryTests out under ASan on 2 cores.
    @Test func everySignInSuiteRunsInTheSignInPass() throws {
        var patterns: [String: Set<String>] = [:]
        for script in ["scripts/run-tests", "scripts/sanitizers"] {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(script), encoding: .utf8)
            let line = try #require(text.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("signin='") })
            let value = line.split(separator: "'")[1]
            patterns[script] = Set(value.split(separator: "|").map(String.init))
        }
        var suites: Set<String> = ["BlockingExecutorTests"]
        for (_, text) in try Self.swiftFiles(under: "Tests/AuthSessionTests") {
            let code = Self.codeLines(text).joined(separator: "\n")
            guard code.contains("redirectURIs:") || code.contains("LoopbackRedirectListener.bind") else { continue }
            for line in Self.codeLines(text) where line.contains("struct ") && line.contains("Tests") {
                if let name = line.split(separator: "struct ").last?.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).first,
                    name.hasSuffix("Tests")
                {
                    suites.insert(String(name))
                }
            }
        }
        #expect(suites.count >= 6, "the walk found the sign-in suites: \(suites.sorted())")
        for (script, named) in patterns {
            // `swift test --filter` matches the pattern's alternatives anywhere in a test's name.
            let missing = suites.filter { suite in !named.contains { suite.contains($0) } }
            #expect(missing.isEmpty, "\(script): sign-in suites not in the sign-in pass: \(missing.sorted())")
        }
    }

    /// In the session's `async` functions (Sources/AuthSession/Session), the store is reached
    /// only through its async forms (`store.async`, `store.ledger.async`) or `blocking { }`, which
    /// run on the package's `BlockingExecutor`: a synchronous store call there would block a
    /// cooperative thread for as long as a transaction waits on a lock or the keyring.
    @Test func theSessionsAsyncCodeAwaitsTheStore() throws {
        let files = try Self.swiftFiles(under: "Sources/AuthSession/Session")
        #expect(files.contains { $0.path.hasSuffix("/TokenSession.swift") }, "the walk found the session")
        let storeCall = try Regex(#"(^|[^A-Za-z0-9_])store\.(ledger\.)?[a-zA-Z]+\("#)
        var asyncLines = 0
        var blocking: [String] = []
        for (path, text) in files {
            var depth = 0
            var asyncBodyDepth: Int?  // the brace depth at which an async function's body began
            var inSignature = false, signatureIsAsync = false
            for line in Self.codeLines(text) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if asyncBodyDepth == nil {
                    if trimmed.contains("func ") { (inSignature, signatureIsAsync) = (true, false) }
                    if inSignature && trimmed.contains(") async") { signatureIsAsync = true }
                }
                let wasInside = asyncBodyDepth != nil
                let opened = depth
                depth += line.filter { $0 == "{" }.count - line.filter { $0 == "}" }.count
                if asyncBodyDepth == nil && inSignature && depth > opened {
                    inSignature = false
                    if signatureIsAsync { asyncBodyDepth = opened }
                } else if let start = asyncBodyDepth, depth <= start {
                    asyncBodyDepth = nil
                }
                guard wasInside || asyncBodyDepth != nil else { continue }
                asyncLines += 1
                if line.contains(storeCall) && !line.contains("blocking") { blocking.append("\(path): \(trimmed)") }
            }
        }
        #expect(asyncLines > 50, "the walk found the session's async functions (\(asyncLines) lines)")
        #expect(blocking.isEmpty, "synchronous store calls in async session code:\n\(blocking.joined(separator: "\n"))")
    }

    @Test func everySuiteAndFreeTestHasATimeLimit() throws {
        let files = try Self.swiftFiles(under: "Tests")
        #expect(files.count > 20, "the walk found the test sources")
        var missing: [String] = []
        for (path, text) in files {
            var depth = 0  // brace depth: a @Test at depth 0 is a free function, outside any suite
            for line in Self.codeLines(text) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("@Suite") && !trimmed.contains(".timeLimit(") {
                    missing.append("\(path): \(trimmed)")
                }
                if depth == 0 && trimmed.hasPrefix("@Test") && !trimmed.contains(".timeLimit(") {
                    missing.append("\(path): \(trimmed)")
                }
                depth += line.filter { $0 == "{" }.count - line.filter { $0 == "}" }.count
            }
        }
        #expect(missing.isEmpty, "without a time limit:\n\(missing.joined(separator: "\n"))")
    }

    @Test func noFoundationProcessAnywhere() throws {
        // `Process()`, `: Process`, `Foundation.Process`, `waitUntilExit` (not ProcessInfo, not restartProcess()).
        let pattern = try Regex(#"(^|[^A-Za-z0-9_])Process\(\)|:\s*Process\b|Foundation\.Process\b|waitUntilExit"#)
        var uses: [String] = []
        for folder in ["Sources", "Tests"] {
            for (path, text) in try Self.swiftFiles(under: folder) where !path.hasSuffix("/TestSuiteHygieneTests.swift") {
                for line in Self.codeLines(text) where line.contains(pattern) {
                    uses.append("\(path): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(uses.isEmpty, "Foundation.Process is used (start programs with ChildProcess):\n\(uses.joined(separator: "\n"))")
    }
}
