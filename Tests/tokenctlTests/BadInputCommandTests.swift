import Foundation
import TestTraits
import Testing
import TestSupport

/// The rows of the new-user trial's bad-input table (new-user-trial.md, section 2) whose
/// verdict was not "good", one test each: a clear message, the sysexits code, nothing changed.
@Suite("tokenctl bad input (the trial's table)", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BadInputCommandTests {
    @Test("no store named: 64, naming --store, --app-id and TOKENCTL_STORE")
    func noStoreNamed() throws {
        let result = try TokenctlBinary.run(["status"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.hasPrefix(
            "tokenctl: error: no store named: give '--store <path>' or '--app-id <id>', or set TOKENCTL_STORE\n"),
            "\(result.standardError)")
    }

    @Test("missing store: 66 (EX_NOINPUT) for the commands that read, naming --app-id and TOKENCTL_STORE; nothing created")
    func missingStoreIsNoInput() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("nowhere/tokens.sqlite").path
        for command in [["status"], ["list"], ["get", "--account", "a", "--kind", "generic"], ["verify"]] {
            let result = try TokenctlBinary.run(["--store", path] + command)
            #expect(result.exitCode == 66, "\(command): \(result.standardError)")
            #expect(result.standardError.hasPrefix("tokenctl: error: no store at the given path\n"))
            #expect(result.standardError.contains("--app-id") && result.standardError.contains("TOKENCTL_STORE"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("nowhere").path))
    }

    @Test("a file that is not SQLite: 65, the file unchanged, and verify's hint is not 'run tokenctl verify'")
    func notSQLiteHintIsNotCircular() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("notes.txt").path
        try Data(String(repeating: "plain text, not a database\n", count: 200).utf8).write(to: URL(fileURLWithPath: path))
        chmod(directory.path, 0o700)
        chmod(path, 0o600)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        for command in [["verify"], ["list"], ["status"], ["put", "--account", "a", "--kind", "generic"]] {
            let result = try TokenctlBinary.run(["--store", path] + command, stdin: "x\n")
            #expect(result.exitCode == 65, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("is not an SQLite database"), "\(command): \(result.standardError)")
            #expect(!result.standardError.contains("tokenctl verify"), "\(command): circular hint")
            #expect(!result.standardError.contains("running a statement"), "\(command): operation noise")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["notes.txt"])
    }

    @Test("a directory instead of a file: 64 with no permission hint")
    func directoryInsteadOfFile() throws {
        let directory = try TemporaryDirectory()
        let store = directory.appending("store").path
        try FileManager.default.createDirectory(atPath: store + "/tokens.sqlite", withIntermediateDirectories: true)
        for path in [store, store + "/tokens.sqlite"] {
            for command in [["status"], ["list"], ["put", "--account", "a", "--kind", "generic"]] {
                let result = try TokenctlBinary.run(["--store", path] + command, stdin: "x\n")
                #expect(result.exitCode == 64, "\(command): \(result.standardError)")
                #expect(result.standardError.contains("names a directory, not a database file"))
                #expect(!result.standardError.contains("0700"), "a permission hint for a mistyped path")
            }
        }
    }

    @Test("--app-id ../etc is a usage error (64)")
    func badAppIDIsUsage() throws {
        let result = try TokenctlBinary.run(["--app-id", "../etc", "status"])
        #expect(result.exitCode == 64, "\(result.standardError)")
        #expect(result.standardError.hasPrefix("tokenctl: error: invalid value for '--app-id <id>'"), "\(result.standardError)")
    }

    @Test("--min-ttl -5 says the value must be ≥ 0, not that it is missing")
    func negativeNumberIsNamedAsSuch() throws {
        let result = try TokenctlBinary.run(
            ["--store", "/nonexistent/t.sqlite", "token", "--domain", "https://example.com", "--client-id", "c", "--account", "a",
             "--min-ttl", "-5"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.hasPrefix("tokenctl: error: invalid value for '--min-ttl <seconds>': must be ≥ 0\n"),
            "\(result.standardError)")
    }

    @Test("stdin closed, stdin a directory, a closed --passphrase-fd: the system's words, not errno numbers")
    func errnoAsText() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        for (redirect, text) in [("<&-", "Bad file descriptor"), ("</", "Is a directory")] {
            let result = try ChildProcess.run(
                "/bin/sh", ["-c", "exec \"$0\" --store \"$1\" put --account a --kind generic \(redirect)", TokenctlBinary.url.path, path])
            #expect(result.termination.shellStatus == 1, "\(result.standardErrorText)")
            #expect(result.standardErrorText.contains("reading the secret from stdin failed: \(text)"), "\(result.standardErrorText)")
            #expect(!result.standardErrorText.contains("errno"))
        }
        let fd = try TokenctlBinary.run(["--store", path, "--passphrase-fd", "250", "put", "--account", "a", "--kind", "generic"], stdin: "x\n")
        #expect(fd.exitCode == 64)
        #expect(fd.standardError.contains("file descriptor 250: Bad file descriptor"), "\(fd.standardError)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("store").path))
    }

    @Test("an unknown command is named; a token-like word is named only by its position")
    func unknownCommandIsNamed() throws {
        let result = try TokenctlBinary.run(["frobnicate"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.hasPrefix("tokenctl: error: unknown command 'frobnicate'\n"), "\(result.standardError)")
        let secret = try TokenctlBinary.run(["v1.MjAyNi0xMi0wMQ"])
        #expect(secret.exitCode == 64)
        #expect(secret.standardError.hasPrefix("tokenctl: error: argument 1 is not a command\n"))
        #expect(!secret.standardError.contains("MjAy"))
    }

    @Test("bare tokenctl: a short usage on stderr and 64")
    func bareTokenctl() throws {
        let result = try TokenctlBinary.run([])
        #expect(result.exitCode == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("Usage: tokenctl [--store <path> | --app-id <id>]"), "\(result.standardError)")
        #expect(result.standardError.split(separator: "\n").count <= 3)
    }

    @Test("--store's help names TOKENCTL_STORE")
    func storeHelpNamesVariable() throws {
        let result = try TokenctlBinary.run(["help"])
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        let index = try #require(lines.firstIndex { $0.hasPrefix("  --store <path>") })
        #expect(lines[index...].prefix(2).joined().contains("TOKENCTL_STORE"), "\(lines[index...].prefix(2))")
    }

    @Test("login --browser with no browser: the message gives no Swift API advice", tokenctlKeyringTrait)
    func browserUnavailableInWordsOfTheCLI() throws {
        let fixture = try SessionCommandTests.Fixture()
        let result = try LoginCommandTests.browserLogin(
            fixture, ["--timeout", "5"], browser: ["BROWSER": "/bin/false", "DISPLAY": "", "WAYLAND_DISPLAY": ""])
        #expect(result.exitCode == 75, "\(result.standardError)")
        #expect(result.standardError.contains("[browserUnavailable]"), "\(result.standardError)")
        #expect(!result.standardError.contains("BrowserOpener"), "\(result.standardError)")
    }
}

/// The one trial row that needs the browser sign-in's listener: a foreign request with the wrong state.
@Suite("tokenctl login: a refused foreign request", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ForeignRedirectWordingTests {
    @Test("a request with a wrong state that ends the wait is told as someone else's, not as the user's mistake")
    func stateMismatchReadsAsForeign() throws {
        let fixture = try SessionCommandTests.Fixture()
        let port = try LoginCommandTests.registeredPort(fixture.server)
        // The "browser" is another program that hits the redirect port with a state of its own.
        let script = fixture.store.directory.appending("foreign-request.sh").path
        try Data("""
            #!/bin/sh
            curl -s -o /dev/null "http://127.0.0.1:\(port)/callback?state=not-this-sign-in&code=x" || true
            exit 0
            """.utf8).write(to: URL(fileURLWithPath: script))
        let result = try fixture.store.run(
            ["login", "--browser", "--account", "alice", "--redirect-port", port, "--timeout", "3"],
            environment: fixture.environment.merging(["BROWSER": "/bin/sh '\(script)'"]) { _, given in given })
        #expect(result.exitCode == 75, "\(result.standardError)")
        #expect(result.standardError.contains("[stateMismatch]"), "\(result.standardError)")
        #expect(!result.standardError.contains("wrong or missing state were refused"), "\(result.standardError)")
        #expect(result.standardError.contains("did not belong to this sign-in"), "\(result.standardError)")
    }
}
