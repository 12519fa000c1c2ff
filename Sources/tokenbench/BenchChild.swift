import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Runs this executable again as a child (`tokenbench <mode> …`) and times it from the
/// parent: `posix_spawn` → `waitpid`, i.e. exec, dynamic linking, runtime start-up, the
/// work and exit (``ChildProcess`` waits in a blocking `waitpid`, so no polling delay is
/// counted). The child prints `key=value` figures of its own on stdout.
enum BenchChild {
    struct Result {
        let wallNanos: UInt64
        let fields: [String: String]
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static var executablePath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 {
            return buffer.withUnsafeBufferPointer {
                String(decoding: UnsafeRawBufferPointer($0).prefix(count), as: UTF8.self)
            }
        }
        return CommandLine.arguments[0]
    }

    static func run(_ arguments: [String]) throws -> Result {
        let result = try ChildProcess.run(executablePath, arguments, standardError: .discard, timeout: nil, dieWithParent: false)
        guard result.termination.succeeded else {
            throw Failure(description: "child \(arguments.first ?? "") failed (\(result.termination))")
        }
        var fields: [String: String] = [:]
        for token in result.standardOutputText.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = token.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return Result(wallNanos: result.wallNanoseconds, fields: fields)
    }

    /// The first line a command (looked up on `PATH`) prints, or nil when it cannot run.
    static func firstLine(of command: [String]) -> String? {
        guard let program = command.first,
            let result = try? ChildProcess.run(
                program, Array(command.dropFirst()), standardError: .discard, timeout: .seconds(30)),
            result.termination.succeeded
        else { return nil }
        return result.standardOutputText.split(separator: "\n").first.map(String.init)
    }
}
