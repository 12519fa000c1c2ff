import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Finds executables built by `swift build` next to the running test binary.
public enum BuiltProducts {
    /// The build directory: `TOKENSTORE_BUILD_DIR`, else the directory of the test executable.
    public static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["TOKENSTORE_BUILD_DIR"] {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // Walk up out of an .xctest bundle if there is one.
        while url.path != "/" {
            url.deleteLastPathComponent()
            if !url.lastPathComponent.hasSuffix(".xctest") && !url.path.contains(".xctest/") { break }
        }
        return url
    }

    /// The executable `name`, or a failure naming the command that builds it.
    public static func executable(_ name: String) throws -> URL {
        let candidate = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: candidate.path) else {
            throw ProductMissing(name: name, directory: directory.path)
        }
        return candidate
    }

    public struct ProductMissing: Error, CustomStringConvertible {
        public let name: String
        public let directory: String
        public var description: String { "\(name) is not built in \(directory); run `swift build --build-tests` first" }
    }
}

/// The result of running a child process to completion.
public struct ChildResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// True when the child was ended by a signal (e.g. SIGKILL).
    public let signaled: Bool

    /// True when the child killed itself at the armed crash point `name`
    /// (`TOKENSTORE_CRASH_POINT`): it announced the point on standard error, then died of SIGKILL.
    public func diedAtCrashPoint(_ name: String) -> Bool {
        signaled && status == SIGKILL && stderr.contains("crash point reached: \(name)\n")
    }
}

/// This process's environment with `overrides` applied and Swift's crash backtracer off (a child
/// killed on purpose should die at once, not spend seconds symbolicating).
public func childEnvironment(_ overrides: [String: String] = [:]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment
    env["SWIFT_BACKTRACE"] = "enable=no"
    for (key, value) in overrides { env[key] = value }
    return env
}

/// Runs `executable` with `arguments`, feeding `stdin`, and waits (bounded by `timeout`
/// seconds: past it the child is killed and ``ChildProcess/TimedOut`` is thrown).
public func runChild(
    _ executable: URL, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
    timeout: TimeInterval = 120
) throws -> ChildResult {
    let result = try ChildProcess.run(
        executable.path, arguments, environment: childEnvironment(environment), input: stdin,
        timeout: .milliseconds(Int64(timeout * 1000)))
    return ChildResult(
        status: result.termination.code, stdout: result.standardOutputText, stderr: result.standardErrorText,
        signaled: result.termination.signaled)
}

/// Runs `body(0..<count)` on `count` threads of its own, all at once, and waits for them.
/// (`DispatchQueue.concurrentPerform` runs only as many iterations at a time as there are
/// cores, which would turn "16 processes at once" into 2 at a time on a 2-core machine.)
public func runAllAtOnce(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}
