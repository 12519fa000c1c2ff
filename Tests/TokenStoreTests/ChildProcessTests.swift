import Foundation
import TestSupport
import TestTraits
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The child-process helper every test and tool starts programs with.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ChildProcessTests {
    @Test func exitStatusOutputAndInput() throws {
        let result = try ChildProcess.run(
            "sh", ["-c", "cat; echo out; echo err >&2; exit 3"], input: Data("in\n".utf8), timeout: .seconds(30))
        #expect(result.termination == .init(code: 3, signaled: false))
        #expect(result.standardOutputText == "in\nout\n")
        #expect(result.standardErrorText == "err\n")
        #expect(result.wallNanoseconds > 0)
    }

    @Test func aSignalIsReportedAsOne() throws {
        let result = try ChildProcess.run("sh", ["-c", "kill -KILL $$"], timeout: .seconds(30))
        #expect(result.termination.signaled && result.termination.code == SIGKILL)
        #expect(result.termination.shellStatus == 128 + SIGKILL)
    }

    @Test func aMissingProgramIsATypedError() {
        #expect(throws: ChildProcess.SpawnFailed.self) {
            try ChildProcess.run("/nonexistent/tokenstore-no-such-program", [], timeout: .seconds(5), dieWithParent: false)
        }
    }

    /// Past the deadline the whole process group is stopped and the error names the command;
    /// a grandchild that keeps stdout open (a daemon) does not hold the call.
    @Test func aDeadlineKillsTheGroupAndNamesTheCommand() throws {
        let marker = "tokenstore-timeout-\(UInt32.random(in: 0...UInt32.max))"
        let started = ContinuousClock.now
        do {
            _ = try ChildProcess.run("sh", ["-c", "sleep 300 & echo $! ; wait # \(marker)"], timeout: .seconds(1))
            Issue.record("the call returned although the child never ends")
        } catch let error as ChildProcess.TimedOut {
            #expect(error.command.contains(marker))
            #expect("\(error)".contains("did not finish within"))
        }
        #expect(ContinuousClock.now - started < .seconds(10))
        // No `sleep 300` of this group is left (pgrep exits 1 when nothing matches).
        let left = try ChildProcess.run("pgrep", ["-f", marker], timeout: .seconds(10))
        #expect(left.termination.code == 1, "still running: \(left.standardOutputText)")
    }

    /// The hang CI met: many children started and awaited from many threads at once. Every
    /// call returns, with the right status, well within its deadline.
    @Test func manyChildrenFromManyThreadsAllReturn() throws {
        let threads = 8, perThread = 25
        let failures = Locked<[String]>([])
        runAllAtOnce(threads) { thread in
            for index in 0..<perThread {
                let code = Int32((thread * perThread + index) % 7)
                do {
                    let result = try ChildProcess.run("sh", ["-c", "exit \(code)"], timeout: .seconds(60))
                    if result.termination != .init(code: code, signaled: false) {
                        failures.mutate { $0.append("thread \(thread) #\(index): \(result.termination)") }
                    }
                } catch {
                    failures.mutate { $0.append("thread \(thread) #\(index): \(error)") }
                }
            }
        }
        #expect(failures.value.isEmpty, "\(failures.value)")
    }

    /// A child asked to die with its parent gets SIGKILL when the thread that started it ends.
    @Test func aChildDiesWithTheThreadThatStartedIt() throws {
        let box = Locked<ChildProcess?>(nil)
        runAllAtOnce(1) { _ in
            box.mutate { $0 = try? ChildProcess.start("sleep", ["300"], dieWithParent: true) }
            // setpriv must have armed PR_SET_PDEATHSIG before this thread ends (a thread that
            // ends first is a race setpriv does not check for; waiting callers never meet it).
            usleep(1_000_000)
        }
        let child = try #require(box.value)
        let termination = try child.wait(timeout: .seconds(20))
        #expect(termination == .init(code: SIGKILL, signaled: true))
    }
}

/// A value shared between threads of a test.
final class Locked<Value>: @unchecked Sendable {  // `stored` is guarded by `lock`
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
