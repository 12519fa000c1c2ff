import Foundation
import TestTraits
import Testing
import TestSupport

/// Every documented tokenctl example runs as typed (new-user trial 2 found `get --raw` without
/// `--kind` and the man page's `logout`/`resume` without a server failing with 64).
///
/// **What is an example.** In README.md and docs/tokenctl.md: every ```` ```console ```` block with
/// a `$ ` line that runs tokenctl (its `$ ` lines, with `\`-continued lines, run in order in one
/// shell, in the repository, as its prose says), and every inline code span that is a one-liner
/// for scripts — one containing `$(tokenctl ` or `| tokenctl ` (a table's `\|` read as `|`). In
/// the man page (`tokenctl __man`): every `.nf`…`.fi` block (EXAMPLES and the command
/// discussions' example lines), in one shell each.
///
/// **How it runs.** Under bash with `set -o pipefail`, each command's status recorded; every
/// status must be 0. A console block that shows a status (`…; echo "exit status $?"`) must
/// print the same `exit status N` lines, in order. The environment is private (HOME, XDG
/// folders, the private keyring), with no `TOKENCTL_*` variable set.
///
/// **Placeholders, filled in mechanically** (nothing else is changed):
/// - `$PWD/.build/debug` → the folder of the tokenctl under test;
/// - `https://TENANT.auth0.com` and `--domain URL` → the test authorization server's URL;
/// - `--client-id ID` and `TOKENCTL_CLIENT_ID=ID` → its client id (`tokenstore-test`);
/// - `--app-id ID` → `--app-id org.example.notes`;
/// - the variables an example reads without setting: `$SECRET` and `$TOKEN` (a test secret),
///   `$CODE` (a fresh single-use Apple authorization code from the test server);
/// - outside the console blocks: the working folder is a new temporary one holding
///   `passphrase.txt`, the browser is the scripted user agent (`$BROWSER`), and the store of
///   `org.example.notes` already holds a generic item of `alice` (what a `get` example reads).
@Suite("Every documented tokenctl example runs as typed", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DocumentedExampleTests {
    struct Example: CustomStringConvertible {
        let source: String
        let commands: [String]
        /// The `exit status N` lines the documentation shows.
        let expectedStatusLines: [String]
        let isConsoleSession: Bool
        var description: String { source }
    }

    static let appID = "org.example.notes"

    // MARK: Extraction

    /// The examples of a Markdown file.
    static func markdownExamples(_ text: String, file: String) -> [Example] {
        var examples: [Example] = []
        let lines = text.components(separatedBy: "\n")
        var index = 0
        var prose: [(number: Int, line: String)] = []
        while index < lines.count {
            let line = lines[index]
            guard line.hasPrefix("```") else {
                prose.append((index + 1, line))
                index += 1
                continue
            }
            let isConsole = line.trimmingCharacters(in: .whitespaces) == "```console"
            let start = index + 1
            var body: [String] = []
            index += 1
            while index < lines.count, !lines[index].hasPrefix("```") {
                body.append(lines[index])
                index += 1
            }
            index += 1
            guard isConsole else { continue }
            var commands: [String] = []
            var statuses: [String] = []
            var continuing = false
            for bodyLine in body {
                if continuing, var last = commands.popLast() {
                    last += "\n" + bodyLine
                    commands.append(last)
                    continuing = bodyLine.hasSuffix("\\")
                } else if bodyLine.hasPrefix("$ ") {
                    commands.append(String(bodyLine.dropFirst(2)))
                    continuing = bodyLine.hasSuffix("\\")
                } else if bodyLine.hasPrefix("exit status ") {
                    statuses.append(bodyLine)
                }
            }
            if commands.contains(where: { $0.contains("tokenctl ") }) {
                examples.append(Example(source: "\(file):\(start)", commands: commands, expectedStatusLines: statuses, isConsoleSession: true))
            }
        }
        for (number, line) in prose {
            for span in inlineCode(line) {
                let command = span.replacingOccurrences(of: "\\|", with: "|")
                if command.contains("$(tokenctl ") || command.contains("| tokenctl ") {
                    examples.append(Example(source: "\(file):\(number)", commands: [command], expectedStatusLines: [], isConsoleSession: false))
                }
            }
        }
        return examples
    }

    /// The single-backtick spans of a line.
    static func inlineCode(_ line: String) -> [String] {
        let parts = line.components(separatedBy: "`")
        return stride(from: 1, to: parts.count - 1, by: 2).map { parts[$0] }.filter { !$0.isEmpty }
    }

    /// The `.nf`…`.fi` blocks of the man page, roff escapes undone.
    static func manPageExamples(_ page: String) -> [Example] {
        var examples: [Example] = []
        var block: [String]?
        for (number, line) in page.components(separatedBy: "\n").enumerated() {
            if line == ".nf" {
                block = []
            } else if line == ".fi", let commands = block {
                examples.append(Example(source: "tokenctl.1:\(number + 1)", commands: commands, expectedStatusLines: [], isConsoleSession: false))
                block = nil
            } else if block != nil, !line.hasPrefix(".") {
                block?.append(unroff(line))
            }
        }
        return examples
    }

    static func unroff(_ line: String) -> String {
        var text = line.replacingOccurrences(of: "\\&", with: "").replacingOccurrences(of: "\\-", with: "-")
        while let range = text.range(of: #"\\\[u[0-9A-F]{4,6}\]"#, options: .regularExpression) {
            let hex = text[range].dropFirst(3).dropLast()
            text.replaceSubrange(range, with: String(Character(Unicode.Scalar(UInt32(hex, radix: 16)!)!)))
        }
        return text.replacingOccurrences(of: "\\e", with: "\\")
    }

    /// The placeholders, filled in (the list in the type's documentation).
    static func filled(_ command: String, serverURL: String, binDirectory: String) -> String {
        [
            ("$PWD/.build/debug", binDirectory), ("https://TENANT.auth0.com", serverURL), ("--domain URL", "--domain \(serverURL)"),
            ("--client-id ID", "--client-id \(AuthorizationServer.publicClientID)"),
            ("TOKENCTL_CLIENT_ID=ID", "TOKENCTL_CLIENT_ID=\(AuthorizationServer.publicClientID)"), ("--app-id ID", "--app-id \(appID)"),
        ].reduce(command) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }

    // MARK: Running

    /// Runs one example; returns its problems (none when every command exited as documented).
    func run(_ example: Example, server: AuthorizationServer) throws -> [String] {
        let scratch = try TemporaryDirectory(prefix: "tokenctl-example")
        let home = scratch.appending("home").path
        let work = scratch.appending("work").path
        for folder in [home, work] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Data("correct horse battery staple\n".utf8).write(to: URL(fileURLWithPath: work + "/passphrase.txt"))
        let binDirectory = TokenctlBinary.url.deletingLastPathComponent().path
        var environment = TokenctlStore.keyringEnvironment
        environment.merge([
            "HOME": home, "XDG_DATA_HOME": home + "/.local/share", "XDG_STATE_HOME": home + "/.local/state",
            "XDG_CONFIG_HOME": home + "/.config", "LANG": "C.UTF-8",
            "PATH": (example.isConsoleSession ? "" : binDirectory + ":") + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
        ]) { _, new in new }
        if !example.isConsoleSession {
            environment.merge(LoginCommandTests.scriptedBrowser) { _, new in new }
            environment["SECRET"] = "example-secret"
            environment["TOKEN"] = "example-token"
            environment["CODE"] = try server.appleAuthorizationCode(for: "000800.example.apple")
            let seeded = try TokenctlBinary.run(
                ["--app-id", Self.appID, "put", "--account", "alice", "--kind", "generic"], environment: environment, stdin: "seeded-secret")
            guard seeded.exitCode == 0 else { return ["seeding the store failed: \(seeded.standardError)"] }
        }
        let statusFile = scratch.appending("statuses").path
        var script = "set -o pipefail\ncd \"$0\" || exit 99\n"
        if example.isConsoleSession {
            // Clean-up only: a server the session started is stopped even when it fails midway.
            script += "trap '[ -n \"${W:-}\" ] && [ -f \"$W/port.pid\" ] && scripts/authserver stop \"$W/port\" >/dev/null 2>&1' EXIT\n"
        }
        let url = server.baseURL.absoluteString
        for (number, command) in example.commands.enumerated() {
            // `true;` first: a line that is only a comment still makes a valid group.
            script += "{ true; \(Self.filled(command, serverURL: url, binDirectory: binDirectory))\n}; echo \"\(number + 1) $?\" >>\"$1\"\n"
        }
        let result = try ChildProcess.run(
            "/bin/bash", ["-c", script, example.isConsoleSession ? repositoryRoot.path : work, statusFile],
            environment: environment, timeout: .seconds(300))
        let transcript = "\n--- output\n\(result.standardOutputText)\(result.standardErrorText)"
        let recorded = (try? String(contentsOfFile: statusFile, encoding: .utf8))?.split(separator: "\n") ?? []
        var problems: [String] = []
        if recorded.count != example.commands.count {
            problems.append("\(example): ran \(recorded.count) of \(example.commands.count) commands\(transcript)")
        }
        for entry in recorded {
            let parts = entry.split(separator: " ")
            guard parts.count == 2, let index = Int(parts[0]), parts[1] != "0" else { continue }
            problems.append("\(example): '\(example.commands[index - 1])' exited \(parts[1])\(transcript)")
        }
        let shown = result.standardOutputText.split(separator: "\n").filter { $0.hasPrefix("exit status ") }.map(String.init)
        if shown != example.expectedStatusLines {
            problems.append("\(example): printed \(shown), the documentation shows \(example.expectedStatusLines)\(transcript)")
        }
        return problems
    }

    @Test("README.md, docs/tokenctl.md and the man page: every example exits as documented")
    func everyExampleRuns() throws {
        let readme = Self.markdownExamples(
            try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8), file: "README.md")
        let reference = Self.markdownExamples(
            try String(contentsOf: repositoryRoot.appendingPathComponent("docs/tokenctl.md"), encoding: .utf8), file: "docs/tokenctl.md")
        let page = try TokenctlBinary.run(["__man"])
        #expect(page.exitCode == 0)
        let manual = Self.manPageExamples(page.standardOutput)
        // The extraction must keep finding them: the console sessions, the one-liners, the man page's blocks.
        #expect(readme.filter(\.isConsoleSession).count == 1 && readme.count >= 2, "\(readme)")
        #expect(reference.filter(\.isConsoleSession).count == 1 && reference.count >= 3, "\(reference)")
        #expect(manual.count >= 8, "\(manual)")
        #expect(manual.contains { $0.commands.contains { $0.contains("get --account alice --raw") } })

        let server = try AuthorizationServer()
        var problems: [String] = []
        var commands = 0
        for example in readme + reference + manual {
            problems += try run(example, server: server)
            commands += example.commands.count
        }
        for problem in problems { Issue.record(Comment(rawValue: problem)) }
        print("METRIC documented_examples examples=\(readme.count + reference.count + manual.count) commands=\(commands) failures=\(problems.count)")
    }
}
