import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

#if canImport(Glibc)
import Glibc
#endif

/// `SystemBrowserOpener` through `$BROWSER` only (GIO and xdg-open are left out so no real
/// browser can open on a developer's desktop), with small scripts that record their arguments.
@Suite("Browser opener", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct BrowserOpenerTests {
    /// A URL with every character a shell would act on.
    static let url = URL(
        string: "http://127.0.0.1:53682/authorize?state=s1;x&nonce=$(touch%20pwned)&redirect_uri=a%20b|c'd\"e")!

    /// A scratch directory with a recording browser script.
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let record: URL
        let recorder: String

        init() throws {
            directory = try TemporaryDirectory(prefix: "browser-opener")
            record = directory.appending("record")
            recorder = try Self.script(
                in: directory, named: "recording browser",
                "printf '%s\\n' \"$$\" > \"$0.pid\"\nprintf '%s\\n' \"$@\" > \"\(record.path).tmp\"\n"
                    + "mv \"\(record.path).tmp\" \"\(record.path)\"\n")
        }

        /// An executable `/bin/sh` script; its path. Written through a descriptor opened with
        /// O_CLOEXEC: a child that another test forks at that moment must not keep the script
        /// open for writing past its exec, or starting the script fails with ETXTBSY (seen once
        /// under AddressSanitizer: "could not start (errno 26)").
        static func script(in directory: TemporaryDirectory, named name: String, _ body: String) throws -> String {
            let path = directory.appending(name).path
            let bytes = Array(("#!/bin/sh\n" + body).utf8)
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
            #expect(fd >= 0)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            #expect(written == bytes.count)
            #expect(close(fd) == 0)
            #expect(chmod(path, 0o755) == 0)
            return path
        }

        /// The arguments the recording script got (one per line), once it wrote them.
        func recordedArguments(within seconds: Double = 10) -> [String]? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let text = try? String(contentsOf: record, encoding: .utf8) {
                    return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
                }
                usleep(10_000)
            }
            return nil
        }

        func opener(browser: String, logger: TokenStoreLogger = .disabled, startCheck: Duration = .milliseconds(500))
            -> SystemBrowserOpener
        {
            var environment = ProcessInfo.processInfo.environment
            environment["BROWSER"] = browser
            return SystemBrowserOpener(
                environment: environment, startCheck: startCheck, methods: [.environmentBrowser], logger: logger)
        }
    }

    /// A shell-quoted word (for paths with spaces inside `$BROWSER`).
    static func quoted(_ word: String) -> String { "'" + word + "'" }

    @Test func browserVariableGetsTheURLAsItsOnlyArgumentWithoutAShell() async throws {
        let fixture = try Fixture()
        let sink = AuthorizationServerClientTests.LogSink()
        try await fixture.opener(browser: Self.quoted(fixture.recorder), logger: sink.logger).open(Self.url)
        #expect(fixture.recordedArguments() == [Self.url.absoluteString])
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.appending("pwned").path))
        #expect(!FileManager.default.fileExists(atPath: "pwned"))
        let lines = sink.lines
        #expect(lines.contains { $0.contains("browser opened") })
        for line in lines {
            #expect(!line.contains("authorize") && !line.contains("s1;x"), "the URL reached the log: \(line)")
        }
    }

    @Test func severalCommandsAreTriedInOrder() async throws {
        let fixture = try Fixture()
        let failing = try Fixture.script(in: fixture.directory, named: "failing", "exit 3\n")
        let browser = ["/nonexistent/browser", Self.quoted(failing), Self.quoted(fixture.recorder)].joined(separator: ":")
        try await fixture.opener(browser: browser).open(Self.url)
        #expect(fixture.recordedArguments() == [Self.url.absoluteString])
    }

    @Test func percentSIsReplacedByTheURL() async throws {
        let fixture = try Fixture()
        try await fixture.opener(browser: "\(Self.quoted(fixture.recorder)) --new-tab \"--url=%s\" 100%%").open(Self.url)
        #expect(fixture.recordedArguments() == ["--new-tab", "--url=\(Self.url.absoluteString)", "100%"])
    }

    @Test func aBrowserStillRunningAfterTheCheckCountsAsStartedAndIsReaped() async throws {
        let fixture = try Fixture()
        // Runs until the test creates `go` (at most 10 min: a loaded machine may starve the test
        // thread for tens of seconds), so it is surely still running when open returns.
        let go = fixture.directory.appending("go").path
        let longRunning = try Fixture.script(
            in: fixture.directory, named: "long running",
            "printf '%s' \"$$\" > \"$0.pid\"\ni=0\nwhile [ ! -e '\(go)' ] && [ $i -lt 12000 ]; do sleep 0.05; i=$((i+1)); done\n"
                + "printf '%s\\n' \"$1\" > \"\(fixture.record.path)\"\n")
        try await fixture.opener(browser: Self.quoted(longRunning), startCheck: .milliseconds(200)).open(Self.url)
        #expect(!FileManager.default.fileExists(atPath: fixture.record.path), "open returned while the browser still runs")
        #expect(FileManager.default.createFile(atPath: go, contents: Data()))
        var pidText = ""
        let pidDeadline = Date().addingTimeInterval(10)
        while pidText.isEmpty && Date() < pidDeadline {
            pidText = (try? String(contentsOfFile: longRunning + ".pid", encoding: .utf8)) ?? ""
            if pidText.isEmpty { usleep(10_000) }
        }
        let pid = try #require(Int32(pidText))
        #expect(fixture.recordedArguments() == [Self.url.absoluteString])
        // Reaped once it exits: a zombie would keep its /proc entry (state Z) until waited for.
        let deadline = Date().addingTimeInterval(10)
        var gone = false
        while Date() < deadline {
            if !FileManager.default.fileExists(atPath: "/proc/\(pid)") {
                gone = true
                break
            }
            usleep(20_000)
        }
        #expect(gone, "the browser process was left as a zombie")
    }

    @Test func nothingWorkingIsBrowserUnavailableWithoutTheURL() async throws {
        let fixture = try Fixture()
        let failing = try Fixture.script(in: fixture.directory, named: "failing", "exit 4\n")
        do {
            try await fixture.opener(browser: "/nonexistent/browser:\(Self.quoted(failing)):'unterminated").open(Self.url)
            Issue.record("opening succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .browserUnavailable)
            #expect(error.message.contains("exit 4"))
            #expect(error.message.contains("not found"))
            #expect(!error.description.contains("authorize") && !error.description.contains("127.0.0.1"))
        }
        // No $BROWSER at all and no other way allowed: unavailable too.
        let none = SystemBrowserOpener(environment: [:], startCheck: .milliseconds(100), methods: [.environmentBrowser], logger: .disabled)
        do {
            try await none.open(Self.url)
            Issue.record("opening succeeded")
        } catch let error as AuthSessionError {
            #expect(error.code == .browserUnavailable)
        }
    }

    @Test func commandLineSplitting() {
        #expect(BrowserCommandLine.words(of: "a  b\t'c d' \"e \\\"f\\\" \\x\" g\\ h") == ["a", "b", "c d", "e \"f\" \\x", "g h"])
        #expect(BrowserCommandLine.words(of: "'open") == nil)
        #expect(BrowserCommandLine.words(of: "x\\") == nil)
        #expect(BrowserCommandLine.words(of: "''") == [""])
        let commands = BrowserCommandLine.commands(in: "firefox::chromium --incognito:'bad")
        #expect(commands.count == 3)
        #expect(commands[0] == ["firefox"])
        #expect(commands[1] == ["chromium", "--incognito"])
        #expect(commands[2] == nil)
        #expect(BrowserCommandLine.arguments(["b", "--x"], url: "U") == ["b", "--x", "U"])
        #expect(BrowserCommandLine.arguments(["b", "%s", "%%s"], url: "U") == ["b", "U", "%s"])
    }
}
