internal import CGlibcExtensions
import FoundationEssentials
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// Runs a small helper program (`qrencode`) to completion with `posix_spawn`: `input` on its
/// stdin, its stdout collected, its stderr discarded, no other descriptor of tokenctl
/// (closefrom 3), an empty signal mask, a process group of its own. Killed after `timeout`.
enum Subprocess {
    /// The program's stdout when it exited 0 within `timeout`; `nil` otherwise.
    static func run(_ arguments: [String], input: [UInt8], timeout: Duration) -> [UInt8]? {
        guard let program = arguments.first else { return nil }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        guard pipe(&stdinPipe) == 0 else { return nil }
        guard pipe(&stdoutPipe) == 0 else {
            close(stdinPipe[0])
            close(stdinPipe[1])
            return nil
        }
        // Close-on-exec: another thread's child never inherits them (the spawned one gets dups).
        for descriptor in stdinPipe + stdoutPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        _ = tokenstore_spawn_add_closefrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let environment: [String] = ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        close(stdinPipe[0])
        close(stdoutPipe[1])
        guard spawned == 0 else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            return nil
        }
        // The input is a URL (well under a pipe's buffer): written at once, then EOF.
        var written = 0
        while written < input.count {
            let count = input.withUnsafeBytes { write(stdinPipe[1], $0.baseAddress! + written, $0.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            written += count
        }
        close(stdinPipe[1])
        let output = readAll(stdoutPipe[0], until: ContinuousClock.now + timeout)
        close(stdoutPipe[0])
        if output == nil { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard let output, status == 0 else { return nil }
        return output
    }

    /// Everything until EOF, or `nil` at the deadline.
    private static func readAll(_ descriptor: Int32, until deadline: ContinuousClock.Instant) -> [UInt8]? {
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: max(1, left.roundedUpMilliseconds)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return output }
            output.append(contentsOf: chunk[0..<count])
            guard output.count <= 1 << 20 else { return nil }
        }
    }
}
