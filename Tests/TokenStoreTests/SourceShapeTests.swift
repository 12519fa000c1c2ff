import Foundation
import TestSupport
import TestTraits
import Testing

/// The shape rules of the package's sources that the compiler cannot see from inside the
/// package (where `package` and `public` look alike): plumbing that is not public, one
/// constant-time comparison, one set of `Duration` conversions. They read the source files.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct SourceShapeTests {
    /// Every code line under `Sources/`, with its file.
    static func sourceLines() throws -> [(path: String, line: String)] {
        let files = try TestSuiteHygieneTests.swiftFiles(under: "Sources")
        #expect(files.count > 100, "the walk found the sources")
        return files.flatMap { file in
            TestSuiteHygieneTests.codeLines(file.text).map { (file.path, $0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    /// Package plumbing that an app must not call or read: recording a credential state
    /// directly, the outbox's live refresh tokens, the outbox listing types no public call
    /// returns, the token-exchange strings and the libcurl error type.
    @Test func plumbingIsNotPublic() throws {
        let plumbing = [
            "func recordCredentialState(", "struct PendingRevocationList", "struct UnreadablePendingRevocation",
            "let tokenExchangeGrantType", "let appleAuthorizationCodeTokenType", "struct CurlError",
        ]
        var exposed: [String] = []
        for (path, line) in try Self.sourceLines() where line.hasPrefix("public ") || line.hasPrefix("open ") {
            if plumbing.contains(where: line.contains) { exposed.append("\(path): \(line)") }
            if path.hasSuffix("TokenStore/Session/SessionTypes.swift"), line.contains("refreshToken") {
                exposed.append("\(path): \(line)")
            }
        }
        #expect(exposed.isEmpty, "public:\n\(exposed.joined(separator: "\n"))")
    }

    /// No source file over 400 lines (as `wc -l` counts), no exception.
    @Test func noSourceFileOver400Lines() throws {
        let long = try TestSuiteHygieneTests.swiftFiles(under: "Sources")
            .map { file in (path: file.path, lines: file.text.count(where: { $0 == "\n" })) }
            .filter { $0.lines > 400 }
        #expect(long.isEmpty, "over 400 lines:\n\(long.map { "\($0.path): \($0.lines)" }.joined(separator: "\n"))")
    }

    /// The sources say why, not which ticket: no issue or review number in them (comments
    /// included; the history is in git).
    @Test func noIssueOrReviewNumbers() throws {
        let pattern = try Regex(#"issue [0-9]+|review N?[0-9]"#)
        let cited = try TestSuiteHygieneTests.swiftFiles(under: "Sources").flatMap { file in
            file.text.split(separator: "\n").filter { $0.contains(pattern) }.map { "\(file.path): \($0.trimmingCharacters(in: .whitespaces))" }
        }
        #expect(cited.isEmpty, "issue or review numbers:\n\(cited.joined(separator: "\n"))")
    }

    /// The GObject library's `TsError` names every error code the Swift library has (but
    /// `cancelled`, which is `G_IO_ERROR_CANCELLED` there): a code added in Swift and not in
    /// `gobject/ts-error.c` would reach a GNOME app as `TS_ERROR_FAILED`.
    @Test func gobjectErrorCodesAreComplete() throws {
        let declared = try Regex(#"static let \w+ = Code\(rawValue: "(\w+)"\)"#)
        let swift = Set(try TestSuiteHygieneTests.swiftFiles(under: "Sources").flatMap { file in
            file.text.matches(of: declared).compactMap { $0.output[1].substring.map(String.init) }
        })
        #expect(swift.count > 40, "the walk found the codes")
        let gobject = try String(contentsOf: repositoryRoot.appendingPathComponent("gobject/ts-error.c"), encoding: .utf8)
        let table = gobject[gobject.range(of: "codes[] = {")!.upperBound...].prefix { $0 != "}" }
        let listed = Set(table.matches(of: try Regex(#""(\w+)""#)).compactMap { $0.output[1].substring.map(String.init) })
        #expect(swift.subtracting(listed) == ["cancelled"], "missing from gobject/ts-error.c: \(swift.subtracting(listed).sorted())")
        #expect(listed.subtracting(swift).isEmpty, "not a Swift code: \(listed.subtracting(swift).sorted())")
    }

    @Test func oneConstantTimeComparison() throws {
        let lines = try Self.sourceLines()
        let memcmp = Set(lines.filter { $0.line.contains("sodium_memcmp") }.map(\.path))
        #expect(memcmp == ["Sources/TokenStore/Envelope/ConstantTime.swift"])
        let spellings = lines.filter { $0.line.contains("enum ConstantTime") || $0.line.contains("func sodiumEqual") }
        #expect(spellings.map(\.path) == ["Sources/TokenStore/Envelope/ConstantTime.swift"])
    }

    @Test func oneSetOfDurationConversions() throws {
        let lines = try Self.sourceLines()
        let extensions = lines.filter { $0.line.hasPrefix("extension Duration") }.map(\.path)
        #expect(extensions == ["Sources/TokenStore/Concurrency/Duration+Conversions.swift"])
        let arithmetic = Set(lines.filter { $0.line.contains("attoseconds") }.map(\.path))
        #expect(arithmetic == ["Sources/TokenStore/Concurrency/Duration+Conversions.swift"])
    }
}
