import Foundation
import TestSupport
import TestTraits
import Testing

/// The help screens, compared with the files in `Golden/`. After an intended change, run
/// `UPDATE_GOLDENS=1 swift test --filter HelpGoldenTests` and review the diff of the files.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct HelpGoldenTests {
    private static let goldenFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().appendingPathComponent("Golden")

    private func expectGolden(
        _ name: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try TokenctlBinary.run(arguments)
        #expect(result.exitCode == 0, sourceLocation: sourceLocation)
        #expect(result.standardError == "", sourceLocation: sourceLocation)
        let file = Self.goldenFolder.appendingPathComponent("\(name).txt")
        if ProcessInfo.processInfo.environment["UPDATE_GOLDENS"] == "1" {
            try Data(result.standardOutput.utf8).write(to: file)
            return
        }
        let expected = try String(contentsOf: file, encoding: .utf8)
        #expect(result.standardOutput == expected, "\(arguments) differs from Golden/\(name).txt", sourceLocation: sourceLocation)
    }

    @Test func rootHelp() throws {
        try expectGolden("root-help", ["--help"])
    }

    @Test func rootHelpSpellings() throws {
        let reference = try TokenctlBinary.run(["--help"]).standardOutput
        // Bare `tokenctl` is a short usage on stderr and 64 since issue 24 (BadInputCommandTests.bareTokenctl).
        for arguments in [["-h"], ["help"], ["help", "help"], ["--json", "--help"]] {
            let result = try TokenctlBinary.run(arguments)
            #expect(result.exitCode == 0)
            #expect(result.standardOutput == reference, "\(arguments)")
        }
    }

    @Test(arguments: ["get", "put", "login", "profile", "state", "reset", "token", "accounts", "clear", "resume"])
    func commandHelp(command: String) throws {
        try expectGolden("help-\(command)", ["help", command])
    }

    @Test(arguments: ["get", "login", "state"])
    func commandHelpSpellingsAgree(command: String) throws {
        let reference = try TokenctlBinary.run(["help", command]).standardOutput
        for arguments in [[command, "--help"], [command, "-h"], ["--store", "x", command, "-h"], ["help", command, "--help"]] {
            let result = try TokenctlBinary.run(arguments)
            #expect(result.exitCode == 0)
            #expect(result.standardOutput == reference, "\(arguments)")
        }
    }

    /// Every command has a help screen that names it in its usage, and nothing is wider than 80 columns.
    @Test func everyCommandHasHelpWithin80Columns() throws {
        let commands = [
            "status", "list", "get", "put", "delete", "state", "history", "login", "profile", "accounts", "token", "logout",
            "clear", "resume", "pending", "discard", "verify", "migrate", "rotate-key", "policy", "polkit-action", "lock", "unlock", "reset", "destroy",
        ]
        let root = try TokenctlBinary.run(["--help"]).standardOutput
        for command in commands {
            #expect(root.contains("\n  \(command) "), "\(command) missing from SUBCOMMANDS")
            let help = try TokenctlBinary.run(["help", command])
            #expect(help.exitCode == 0)
            #expect(help.standardOutput.contains("USAGE: tokenctl \(command)"))
            let wide = help.standardOutput.split(separator: "\n").filter { $0.count > 80 }
            #expect(wide.isEmpty, "\(command): \(wide)")
        }
        #expect(root.split(separator: "\n").allSatisfy { $0.count <= 80 })
    }
}
