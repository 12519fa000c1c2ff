import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn` and awaited with `waitpid` on its own pid.
///
/// The one way tests and tools start programs. `Foundation.Process` is not used: on Linux its
/// SIGCHLD / run-loop bookkeeping can miss the exit of a child when many are started and
/// awaited from several threads at once, and `waitUntilExit()` then never returns (a whole
/// CI run hung that way). Here nothing global is installed: each call reaps exactly the pid it
/// spawned.
///
/// - The child starts with an empty signal mask and default dispositions (test threads block
///   signals, and a mask passed on would make a `dbus-daemon` ignore the SIGTERM meant for it).
/// - By default it runs in a process group of its own, so a time-out stops the whole tree it
///   started; and, for run-to-completion calls, it gets `PR_SET_PDEATHSIG` = SIGKILL (through
///   util-linux's `setpriv`, since `posix_spawn` cannot set it), so it dies with the test.
/// - Captured output goes to temporary files, never pipes: a daemon started by the child that
///   keeps a descriptor open cannot hold the call, and a chatty child cannot block.
public final class ChildProcess: @unchecked Sendable {  // `termination` is guarded by `lock`
    /// Where a standard stream goes.
    public enum Output: Sendable {
        /// Into a temporary file, read back into the result.
        case capture
        /// `/dev/null`.
        case discard
        /// Appended to this file (created 0600 if missing).
        case append(String)
        /// Into a pipe whose read end ``standardOutputDescriptor`` hands to the caller (stdout only).
        case pipe
    }

    /// How a child ended.
    public struct Termination: Sendable, Equatable {
        /// The exit status, or the number of the signal that ended it.
        public let code: Int32
        public let signaled: Bool
        /// The status as a shell shows it: the exit status, or 128 + the signal.
        public var shellStatus: Int32 { signaled ? 128 + code : code }
        /// Exit status 0.
        public var succeeded: Bool { !signaled && code == 0 }

        public init(code: Int32, signaled: Bool) {
            self.code = code
            self.signaled = signaled
        }
    }

    /// A finished run: how it ended and what it printed.
    public struct Result: Sendable, CustomStringConvertible {
        public let command: String
        public let termination: Termination
        public let standardOutput: [UInt8]
        public let standardError: [UInt8]
        /// Monotonic nanoseconds from just before `posix_spawn` to `waitpid` returning.
        public let wallNanoseconds: UInt64

        public var standardOutputText: String { String(decoding: standardOutput, as: UTF8.self) }
        public var standardErrorText: String { String(decoding: standardError, as: UTF8.self) }
        public var description: String {
            "\(command): \(termination.signaled ? "signal \(termination.code)" : "exit \(termination.code)")"
                + "\n--- stdout\n\(standardOutputText)\n--- stderr\n\(standardErrorText)"
        }
    }

    /// A child that outlived its deadline; it has been stopped (SIGTERM to its group, then
    /// SIGKILL 2 s later) and reaped.
    public struct TimedOut: Error, CustomStringConvertible {
        public let command: String
        public let timeout: Duration
        public let standardError: String
        public var description: String {
            "\(command) did not finish within \(timeout) and was killed; its stderr ends:\n\(standardError.suffix(2000))"
        }
    }

    /// `posix_spawn` itself failed (program missing, not executable, …).
    public struct SpawnFailed: Error, CustomStringConvertible {
        public let command: String
        public let errno: Int32
        public var description: String { "cannot run \(command): \(String(cString: strerror(errno))) (errno \(errno))" }
    }

    public let pid: pid_t
    /// The program and its arguments, shortened, for messages.
    public let command: String
    /// The read end of the stdout pipe when started with `.pipe`; the caller reads and closes it.
    public let standardOutputDescriptor: Int32?
    private let ownGroup: Bool
    private let scratch: TemporaryDirectory
    private let spawnedAt: UInt64
    private let lock = NSLock()
    private var termination: Termination?
    private var exitedAt: UInt64 = 0

    // MARK: - Running to completion

    /// Runs `program` (looked up on `PATH` when it has no slash) and waits for it.
    ///
    /// - Parameters:
    ///   - environment: the whole environment of the child (default: this process's).
    ///   - input: fed on stdin; `nil` gives `/dev/null`.
    ///   - timeout: after it, the child's group gets SIGTERM, then SIGKILL, and the call throws
    ///     ``TimedOut``; `nil` waits without a bound (benchmarks time a blocking `waitpid`).
    ///   - dieWithParent: run the program under `setpriv --pdeathsig KILL` (benchmarks that
    ///     time the spawn turn it off).
    /// - Throws: ``SpawnFailed``, ``TimedOut``.
    public static func run(
        _ program: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil,
        standardError: Output = .capture, timeout: Duration? = .seconds(120), dieWithParent: Bool = true
    ) throws -> Result {
        let child = try start(
            program, arguments, environment: environment, input: input, standardOutput: .capture,
            standardError: standardError, dieWithParent: dieWithParent)
        let termination = try child.wait(timeout: timeout)
        return Result(
            command: child.command, termination: termination, standardOutput: child.captured("stdout"),
            standardError: child.captured("stderr"), wallNanoseconds: child.wallNanoseconds)
    }

    // MARK: - Starting

    /// Starts `program` and returns at once.
    ///
    /// - Parameters:
    ///   - ownProcessGroup: put the child in a new process group (time-outs stop the group).
    ///   - dieWithParent: the child gets SIGKILL when the spawning *thread* ends (that is what
    ///     `PR_SET_PDEATHSIG` watches): only for children awaited on the thread that started
    ///     them, which ``run(_:_:environment:input:standardError:timeout:dieWithParent:)`` does.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    public static func start(
        _ program: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil,
        standardOutput: Output = .capture, standardError: Output = .capture, ownProcessGroup: Bool = true,
        dieWithParent: Bool = false
    ) throws -> ChildProcess {
        let scratch = try TemporaryDirectory(prefix: "tokenstore-child")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        var inPath = "/dev/null"
        if let input {
            inPath = scratch.appending("stdin").path
            try input.write(to: URL(fileURLWithPath: inPath))
        }
        posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)

        var pipeEnds: [Int32] = [-1, -1]
        func route(_ output: Output, to descriptor: Int32, name: String) throws {
            switch output {
            case .capture:
                posix_spawn_file_actions_addopen(
                    &actions, descriptor, scratch.appending(name).path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            case .discard:
                posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
            case .append(let path):
                posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            case .pipe:
                guard descriptor == 1, pipe(&pipeEnds) == 0 else {
                    throw SpawnFailed(command: program, errno: descriptor == 1 ? errno : EINVAL)
                }
                // Close-on-exec, so no other child spawned meanwhile keeps the write end open.
                // (A spawn on another thread between pipe() and here can still inherit it; the
                // reader then ends on the child's exit, see StreamingChild.finish.)
                _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
                posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
            }
        }
        try route(standardOutput, to: 1, name: "stdout")
        try route(standardError, to: 2, name: "stderr")
        // Only 0, 1 and 2 reach the child. A descriptor another thread holds without
        // close-on-exec (tpm2-tss's TPM socket, opened while a TPM session connects) would
        // otherwise live on in a long-lived child (a test server) and keep swtpm, which serves
        // one connection at a time, from serving anyone else: seen in CI as every later TPM call
        // of a time-out test failing, and as a tokenctl child finding fd 250 open.
        // (glibc ≥ 2.34 has it; Swift's Glibc module does not import it, hence dlsym.)
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var argumentVector = [program] + arguments
        if dieWithParent, access(setpriv, X_OK) == 0 {
            argumentVector = [setpriv, "--pdeathsig", "KILL", "--"] + argumentVector
        }
        let argv: [UnsafeMutablePointer<CChar>?] = argumentVector.map { strdup($0) } + [nil]
        let env = environment ?? ProcessInfo.processInfo.environment
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }

        let command = describe(program, arguments)
        var pid: pid_t = 0
        let spawnedAt = monotonicNanoseconds()
        let spawned = posix_spawnp(&pid, argumentVector[0], &actions, &attributes, argv, envp)
        if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
        guard spawned == 0 else {
            if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
            throw SpawnFailed(command: command, errno: spawned)
        }
        return ChildProcess(
            pid: pid, command: command, standardOutputDescriptor: pipeEnds[0] >= 0 ? pipeEnds[0] : nil,
            ownGroup: ownProcessGroup, scratch: scratch, spawnedAt: spawnedAt)
    }

    private init(
        pid: pid_t, command: String, standardOutputDescriptor: Int32?, ownGroup: Bool, scratch: TemporaryDirectory,
        spawnedAt: UInt64
    ) {
        self.pid = pid
        self.command = command
        self.standardOutputDescriptor = standardOutputDescriptor
        self.ownGroup = ownGroup
        self.scratch = scratch
        self.spawnedAt = spawnedAt
    }

    deinit {
        // Never leave a child behind: a caller that dropped it without waiting gets it killed and reaped.
        if poll() == nil {
            signal(SIGKILL)
            _ = try? wait(timeout: nil)
        }
    }

    // MARK: - Waiting

    /// How the child ended, if it has (never blocks).
    @discardableResult
    public func poll() -> Termination? {
        lock.withLock {
            if let termination { return termination }
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, WNOHANG) } while reaped < 0 && errno == EINTR
            guard reaped == pid else { return nil }
            return recordLocked(status)
        }
    }

    public var isRunning: Bool { poll() == nil }

    /// Waits for the child to end.
    ///
    /// With a `timeout`, polls `waitpid(pid, WNOHANG)`; past the deadline the child (its group
    /// when it has one) gets SIGTERM, then SIGKILL 2 s later, is reaped, and ``TimedOut`` is
    /// thrown. Without one, blocks in `waitpid(pid, 0)`.
    @discardableResult
    public func wait(timeout: Duration?) throws -> Termination {
        if let done = poll() { return done }
        guard let timeout else {
            // Blocks outside the lock, so `signal` stays usable from another thread meanwhile.
            while true {
                if let done = poll() { return done }
                var status: Int32 = 0
                let reaped = waitpid(pid, &status, 0)
                if reaped == pid { return lock.withLock { termination ?? recordLocked(status) } }
                if reaped < 0 && errno == EINTR { continue }
                // ECHILD: a concurrent `poll` reaped it and is recording the outcome.
                if let done = lock.withLock({ termination }) { return done }
                usleep(1_000)
            }
        }
        let deadline = ContinuousClock.now + timeout
        var pause: UInt32 = 1_000
        while ContinuousClock.now < deadline {
            if let done = poll() { return done }
            usleep(pause)
            pause = min(pause * 2, 20_000)
        }
        if let done = poll() { return done }
        stop()
        throw TimedOut(command: command, timeout: timeout, standardError: String(decoding: captured("stderr"), as: UTF8.self))
    }

    /// SIGTERM to the child (its group when it has one), SIGKILL 2 s later if it is still
    /// there; returns once it is reaped.
    @discardableResult
    public func stop(grace: Duration = .seconds(2)) -> Termination {
        if let done = poll() { return done }
        signal(SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if let done = poll() { return done }
            usleep(10_000)
        }
        signal(SIGKILL)
        return (try? wait(timeout: nil)) ?? Termination(code: SIGKILL, signaled: true)
    }

    /// Sends `number` to the child, or to its whole group when it has one. No effect once reaped.
    public func signal(_ number: Int32) {
        lock.withLock {
            guard termination == nil else { return }
            _ = kill(ownGroup ? -pid : pid, number)
        }
    }

    /// Nanoseconds from just before `posix_spawn` to the reaping `waitpid` (0 while running).
    public var wallNanoseconds: UInt64 { lock.withLock { termination == nil ? 0 : exitedAt - spawnedAt } }

    /// What the child wrote to a `.capture`d stream ("stdout" or "stderr") so far.
    public func captured(_ stream: String) -> [UInt8] {
        (try? readAll(scratch.appending(stream).path)) ?? []
    }

    // MARK: - Private

    private func recordLocked(_ status: Int32) -> Termination {
        exitedAt = monotonicNanoseconds()
        let signalNumber = status & 0x7f
        let done = signalNumber == 0
            ? Termination(code: (status >> 8) & 0xff, signaled: false)
            : Termination(code: signalNumber, signaled: true)
        termination = done
        return done
    }

    private static let setpriv = "/usr/bin/setpriv"

    private static func describe(_ program: String, _ arguments: [String]) -> String {
        let text = ([program] + arguments).joined(separator: " ")
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }

    /// Reads a whole file with POSIX calls (`Data(contentsOf:)` leaks a buffer per call in
    /// this toolchain's FoundationEssentials, which would show up in sanitizer runs).
    private func readAll(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }
}

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`).
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
