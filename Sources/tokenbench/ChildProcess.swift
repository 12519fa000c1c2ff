import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs this executable again as a child (`tokenbench <mode> …`) and times it from the
/// parent: `posix_spawn` → `waitpid`, i.e. exec, dynamic linking, runtime start-up, the
/// work and exit. The child prints `key=value` figures of its own on stdout.
enum ChildProcess {
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
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw Failure(description: "pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])

        let path = executablePath
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let start = monotonicNanos()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(pipeFDs[1])
        guard rc == 0 else {
            close(pipeFDs[0])
            throw Failure(description: "posix_spawn failed (\(rc))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let wall = monotonicNanos() - start

        var output = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipeFDs[0], &chunk, chunk.count)
            if count <= 0 { break }
            output.append(contentsOf: chunk[0..<count])
        }
        close(pipeFDs[0])
        let exited = (status & 0x7f) == 0
        let exitCode = (status >> 8) & 0xff
        guard exited, exitCode == 0 else {
            throw Failure(description: "child \(arguments.first ?? "") failed (status \(status))")
        }
        var fields: [String: String] = [:]
        for token in String(decoding: output, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = token.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return Result(wallNanos: wall, fields: fields)
    }
}
