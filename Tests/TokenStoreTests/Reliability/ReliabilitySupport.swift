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
/// the test can SIGKILL at any moment.
final class StreamingChild: @unchecked Sendable {  // mutable state is guarded by `condition`
    let process = Process()
    private let condition = NSCondition()
    private var buffer = Data()
    private var lines: [String] = []
    private var finished = false
    private let errPipe = Pipe()
    private var errData = Data()

    init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.environment = childEnvironment(environment)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let reader = out.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = reader.availableData
                condition.lock()
                if chunk.isEmpty {
                    finished = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 0x0a) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[(newline + 1)...])
                }
                condition.broadcast()
                condition.unlock()
            }
        }
        let errReader = errPipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            let data = errReader.readDataToEndOfFile()
            condition.lock()
            errData = data
            condition.unlock()
        }
    }

    var pid: Int32 { process.processIdentifier }

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

    func kill9() { _ = kill(process.processIdentifier, SIGKILL) }

    /// Waits for the process and its output to end; returns every stdout line.
    func finish() -> [String] {
        process.waitUntilExit()
        condition.lock()
        while !finished { condition.wait() }
        let result = lines + (buffer.isEmpty ? [] : [String(decoding: buffer, as: UTF8.self)])  // a torn last line
        condition.unlock()
        return result
    }

    var stderr: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: errData, as: UTF8.self)
    }

    var killedBySignal: Bool { process.terminationReason == .uncaughtSignal }
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
