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
