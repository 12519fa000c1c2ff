internal import CGlibcExtensions
import FoundationEssentials
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// Starts a browser command with `posix_spawn` (never `Foundation.Process`) and tells
/// whether it started, without waiting for the browser to exit.
///
/// - The program is looked up on the given environment's `PATH` when it has no slash.
/// - The child gets `/dev/null` for stdin, stdout and stderr (a launcher that echoes the URL
///   cannot put it into the app's logs), no other descriptor of the app (closefrom 3), an
///   empty signal mask, default signal dispositions, and a process group of its own (a
///   Ctrl-C in the app's terminal does not reach the browser).
/// - The start check polls `waitpid(pid, WNOHANG)` for a short while: an exit with status
///   0 (a launcher that handed the URL to a running browser) is a success, another status
///   a failure; a child still running then is a success, and a detached thread reaps it
///   whenever it exits, so no zombie is left.
enum BrowserProcess {
    /// How a start attempt went.
    enum Outcome: Equatable {
        /// Exited with status 0 within the check, or still running after it.
        case started
        /// Not found or not executable on `PATH`.
        case notFound
        /// `posix_spawn` failed with this errno.
        case spawnFailed(Int32)
        /// Exited with this status (or was killed by this signal) within the check.
        case failed(status: Int32, signaled: Bool)

        /// A short description without arguments (the URL is one of them).
        var summary: String {
            switch self {
            case .started: return "started"
            case .notFound: return "not found"
            case .spawnFailed(let number): return "could not start (errno \(number))"
            case .failed(let status, let signaled): return signaled ? "killed by signal \(status)" : "exit \(status)"
            }
        }
    }

    /// Runs `arguments` (program first) in `environment` and checks for `startCheck` that it started.
    static func start(_ arguments: [String], environment: [String: String], startCheck: Duration) -> Outcome {
        guard let program = arguments.first, !program.isEmpty,
            let path = resolve(program, path: environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin")
        else { return .notFound }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        _ = tokenstore_spawn_add_closefrom(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        var spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        // ETXTBSY: a script just written is still open for writing in a child another thread
        // is forking (it holds the descriptor until its exec). That passes within moments.
        // Up to about 2 s in all (20 ms doubling to 320 ms): a loaded machine can hold that
        // child between its fork and its exec for longer than a few tens of milliseconds.
        var retries = 0
        var pause: UInt32 = 20_000
        while spawned == ETXTBSY && retries < 10 {
            retries += 1
            usleep(pause)
            pause = min(pause * 2, 320_000)
            spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        }
        guard spawned == 0 else { return spawned == ENOENT ? .notFound : .spawnFailed(spawned) }
        return check(pid, for: startCheck)
    }

    /// Waits up to `duration` for `pid` to exit; hands it to a reaper thread if it does not.
    private static func check(_ pid: pid_t, for duration: Duration) -> Outcome {
        let deadline = ContinuousClock.now + duration
        var pause: UInt32 = 2_000
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                let signal = status & 0x7F
                if signal != 0 { return .failed(status: signal, signaled: true) }
                let code = (status >> 8) & 0xFF
                // 127: the shell's "command not found" (a wrapper script whose browser is missing).
                return code == 0 ? .started : .failed(status: code, signaled: false)
            }
            if reaped < 0 {
                if errno == EINTR { continue }
                // ECHILD: the app ignores SIGCHLD, so the kernel reaps children itself.
                return .started
            }
            if ContinuousClock.now >= deadline { break }
            usleep(pause)
            pause = min(pause * 2, 50_000)
        }
        reapInBackground(pid)
        return .started
    }

    /// Reaps `pid` on a detached thread whenever it exits (a browser may run for hours).
    private static func reapInBackground(_ pid: pid_t) {
        // Without a thread the exited browser stays a zombie until this process ends: harmless.
        DetachedThread.start(name: "tokenstore-browser-reaper", stackSize: 64 * 1024) {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    /// `program` itself when it has a slash, else the first executable `PATH` entry holding it.
    static func resolve(_ program: String, path: String) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        for directory in path.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
