import Foundation
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// Shared helpers of the reliability catalogue tests (Tests/TokenStoreTests/Reliability).
enum Reliability {
    /// `TOKENSTORE_SOAK=1` selects the soak sizes (`make soak`); CI sizes otherwise.
    static var soak: Bool { ProcessInfo.processInfo.environment["TOKENSTORE_SOAK"] == "1" }

    /// The seed of a randomised test: env `SEED`, else a fresh one. Printed as `SEED=<n>`.
    static func seed(_ test: String) -> UInt64 {
        let value = ProcessInfo.processInfo.environment["SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("SEED=\(value) (\(test); rerun with SEED=\(value))")
        return value
    }

    /// Prints the one `METRIC <name> key=value ...` line of a catalogue test.
    static func metric(_ name: String, _ fields: KeyValuePairs<String, any CustomStringConvertible>) {
        let text = fields.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        print("METRIC \(name) \(text)")
    }

    static func child() throws -> URL { try BuiltProducts.executable("tokenstore-testchild") }
}

/// A child process whose standard output is read line by line while it runs, and which
/// the test can SIGKILL at any moment (a ``ChildProcess`` with its stdout on a pipe).
final class StreamingChild: @unchecked Sendable {  // mutable state is guarded by `condition`
    private let child: ChildProcess
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    private var lines: [String] = []
    private var finished = false

    init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        child = try ChildProcess.start(
            executable.path, arguments, environment: childEnvironment(environment), standardOutput: .pipe)
        guard let descriptor = child.standardOutputDescriptor else { preconditionFailure("started with .pipe") }
        Thread.detachNewThread { [self] in
            defer { close(descriptor) }
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                condition.lock()
                if count <= 0 {
                    finished = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                buffer.append(contentsOf: chunk[0..<count])
                while let newline = buffer.firstIndex(of: 0x0a) {
                    lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                }
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    var pid: Int32 { child.pid }

    /// Waits until a line satisfying `predicate` arrived (true), or the output ended or the time ran out (false).
    func waitForLine(timeout: TimeInterval, _ predicate: (String) -> Bool) -> Bool {
        let deadline = Date() + timeout
        condition.lock()
        defer { condition.unlock() }
        while true {
            if lines.contains(where: predicate) { return true }
            if finished { return false }
            if !condition.wait(until: deadline) { return lines.contains(where: predicate) }
        }
    }

    func kill9() { child.signal(SIGKILL) }

    /// Waits (at most `timeout`) for the process and its output to end; returns every stdout line.
    func finish(timeout: Duration = .seconds(120)) throws -> [String] {
        try child.wait(timeout: timeout)
        condition.lock()
        let deadline = Date() + 10  // a grandchild holding the pipe must not hold the test
        while !finished && condition.wait(until: deadline) {}
        let result = lines + (buffer.isEmpty ? [] : [String(decoding: buffer, as: UTF8.self)])  // a torn last line
        condition.unlock()
        return result
    }

    var stderr: String { String(decoding: child.captured("stderr"), as: UTF8.self) }

    var killedBySignal: Bool { child.poll()?.signaled ?? false }
}

/// The code of a TokenStoreError thrown by `body`, "ok" on success, "untyped" for anything else.
func outcomeCode(_ body: () throws -> Void) -> String {
    do {
        try body()
        return "ok"
    } catch let error as TokenStoreError {
        return error.code.rawValue
    } catch {
        return "untyped"
    }
}
