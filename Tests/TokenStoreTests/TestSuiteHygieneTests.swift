import Foundation
import TestSupport
import TestTraits
import Testing

/// Rules that keep the test suite from hanging (a CI run that hangs lands nothing):
/// every suite has a time limit and says where it runs (no test holds the cooperative pool),
/// and no code starts a program through `Foundation.Process`, whose exit can go unnoticed on
/// Linux (see `ChildProcess`).
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct TestSuiteHygieneTests {
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

    /// One test pass (besides the serialized ExclusiveKeyring one) in scripts/run-tests and
    /// scripts/sanitizers: no suite needs a pass of its own to find the cooperative pool free,
    /// because no test holds it (``everySuiteSaysWhereItRuns()``). Replaces the check that the
    /// sign-in suites were listed in a separate sign-in pass.
    @Test func oneTestPass() throws {
        for script in ["scripts/run-tests", "scripts/sanitizers"] {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(script), encoding: .utf8)
            let code = text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
            let runs = code.filter { $0.contains(" test --skip-build") }
            // The long suites that mostly wait start beside the pass (in the background, `&`), not
            // before or after it: they are not a pass of their own.
            let beside = runs.filter { $0.contains("--filter \"$long_suites\"") }
            #expect(beside.allSatisfy { $0.trimmingCharacters(in: .whitespaces).hasSuffix("&") }, "\(script): \(beside)")
            let passes = runs.filter { !$0.contains("--filter ExclusiveKeyring") && !$0.contains("--filter \"$long_suites\"") }
            #expect(passes.count == 1, "\(script): one test pass besides the ExclusiveKeyring one: \(runs)")
            #expect(!code.contains { $0.contains("signin=") }, "\(script): a separate sign-in pass")
        }
    }

    /// Every suite and free test says where its tests run: `.offPool` (the test suite's own
    /// threads; Tests/TestTraits) or `.cooperativePool` (only the tests about the pool itself,
    /// `BlockingExecutorTests`). Swift Testing runs every test on the cooperative pool, as many
    /// threads as cores: two tests that block there (a child process waited for, a store call,
    /// a sleep, a crash loop) stall every `async` test's listener and timers (one merged pass
    /// timed the sign-in suites out under ASan on 2 cores).
    @Test func everySuiteSaysWhereItRuns() throws {
        let files = try ["Tests/TokenStoreTests", "Tests/AuthSessionTests", "Tests/tokenctlTests"].flatMap {
            try Self.swiftFiles(under: $0)
        }
        var suites = 0
        var missing: [String] = []
        var onThePool: [String] = []
        for (path, text) in files {
            var depth = 0  // brace depth: a @Test at depth 0 is a free function, outside any suite
            for line in Self.codeLines(text) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("@Suite") || (depth == 0 && trimmed.hasPrefix("@Test")) {
                    suites += 1
                    if trimmed.contains(".cooperativePool") {
                        onThePool.append(path)
                    } else if !trimmed.contains(".offPool") {
                        missing.append("\(path): \(trimmed)")
                    }
                }
                depth += line.filter { $0 == "{" }.count - line.filter { $0 == "}" }.count
            }
        }
        #expect(suites > 80, "the walk found the suites (\(suites))")
        #expect(missing.isEmpty, "neither .offPool nor .cooperativePool:\n\(missing.joined(separator: "\n"))")
        #expect(onThePool == ["Tests/TokenStoreTests/BlockingExecutorTests.swift"], "on the cooperative pool: \(onThePool)")
    }

    /// `.offPool` does what it says: this test (a synchronous one, in an `.offPool` suite) runs
    /// on one of `OffPoolExecutor`'s threads, and so does an `async` test after an `await`.
    @Test func offPoolTestsRunOffThePool() async throws {
        #expect(OffPoolExecutor.isCurrentThread, "an .offPool test started on a cooperative thread")
        try await Task.sleep(for: .milliseconds(1))
        #expect(OffPoolExecutor.isCurrentThread, "an .offPool test came back to a cooperative thread")
        let child = await withTaskGroup(of: Bool.self) { group in
            group.addTask { OffPoolExecutor.isCurrentThread }
            return await group.next() ?? false
        }
        #expect(child, "a child task of an .offPool test ran on a cooperative thread")
        // The suite took its place before it started (outside the time limit), the test its own.
        #expect(PoolTrait.isInSuitePlace, "an .offPool test ran outside its suite's place")
        #expect(PoolTrait.isInTestPlace, "an .offPool test ran without a test place")
    }

    /// In the session's `async` functions (Sources/AuthSession/Session), the store is reached
    /// only through its one async route (`StoreWork.perform(on:)`, `StoreWork.transaction(on:)`,
    /// `StoreWork.blocking { }`: the store as the closure's `$0`), which
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
                // `store.onBlockingExecutor(presence:)` is the async form itself (its body runs on the executor).
                if line.contains(storeCall) && !line.contains("blocking") && !line.contains("store.onBlockingExecutor(presence:") {
                    blocking.append("\(path): \(trimmed)")
                }
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
