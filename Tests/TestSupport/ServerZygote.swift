import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts test authorization servers by fork from one Python process that has done the imports
/// (Tests/AuthServer/zygote.py): a `python server.py` spent ~0.35 s of CPU importing Flask,
/// Authlib and cryptography before it bound its port, and a test process starts hundreds of
/// servers, three times in CI (plain, ASan, TSan) on a machine that is CPU-bound throughout.
///
/// One zygote per test process, started on first use; it exits when this process does.
/// `TOKENSTORE_AUTHSERVER_ZYGOTE=0` turns it off (every server is then `python server.py`), and so
/// does a `TOKENSTORE_AUTHSERVER_SCRIPT` of one's own.
final class ServerZygote: @unchecked Sendable {  // immutable after init
    private let process: ChildProcess
    private let directory: TemporaryDirectory
    let socketPath: String

    /// The process's zygote, or nil when it is turned off or could not start (then servers start
    /// as before).
    static let shared: ServerZygote? = {
        let env = ProcessInfo.processInfo.environment
        guard AuthorizationServer.zygoteWanted else { return nil }
        let python = env["TOKENSTORE_AUTHSERVER_PYTHON"]
            ?? repositoryRoot.appendingPathComponent(".build/authserver-venv/bin/python").path
        return try? ServerZygote(python: python)
    }()

    private init(python: String) throws {
        directory = try TemporaryDirectory(prefix: "tokenstore-zygote")
        socketPath = directory.appending("zygote.sock").path
        guard socketPath.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw AuthorizationServer.Failure.startFailed("zygote: socket path too long")
        }
        let script = repositoryRoot.appendingPathComponent("Tests/AuthServer/zygote.py").path
        process = try ChildProcess.start(
            python, [script, "--socket", socketPath], standardOutput: .discard,
            standardError: .append(directory.appending("zygote.log").path), ownProcessGroup: false)
        let deadline = ContinuousClock.now + .seconds(20)
        while !FileManager.default.fileExists(atPath: socketPath) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.stop()
                throw AuthorizationServer.Failure.startFailed("zygote did not start")
            }
            usleep(10_000)
        }
        // At exit the zygote is stopped and reaped: the servers' CPU time (the zygote reaps them)
        // then counts in this process's children, for `time` around a test run.
        atexit { ServerZygote.shared?.process.stop(grace: .seconds(2)) }
    }

    /// Forks a server that runs `server.main(arguments)` with its standard error appended to
    /// `standardError`.
    func start(_ arguments: [String], standardError: String, timeout: TimeInterval) throws -> ForkedServer {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AuthorizationServer.Failure.startFailed("zygote: socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(socketPath.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw AuthorizationServer.Failure.startFailed("zygote: connect: errno \(errno)")
        }
        do {
            var request = try JSONSerialization.data(withJSONObject: ["argv": arguments, "stderr": standardError])
            request.append(UInt8(ascii: "\n"))
            try request.withUnsafeBytes { raw in
                var sent = 0
                while sent < raw.count {
                    let n = send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                    guard n > 0 else { throw AuthorizationServer.Failure.startFailed("zygote: send: errno \(errno)") }
                    sent += n
                }
            }
            // "PID <n>\n" from the forked server.
            var line: [UInt8] = []
            let deadline = ContinuousClock.now + .seconds(timeout)
            while line.last != UInt8(ascii: "\n") {
                var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = deadline - ContinuousClock.now
                guard left > .zero else { throw AuthorizationServer.Failure.startFailed("zygote: no answer") }
                if Glibc.poll(&pollFD, 1, Int32(left.components.seconds * 1000 + 1)) <= 0 { continue }
                var byte: UInt8 = 0
                guard recv(fd, &byte, 1, 0) == 1 else { throw AuthorizationServer.Failure.startFailed("zygote: the server ended before it started") }
                line.append(byte)
            }
            let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard text.hasPrefix("PID "), let pid = pid_t(text.dropFirst(4)), pid > 0 else {
                throw AuthorizationServer.Failure.startFailed("zygote: unexpected answer")
            }
            return ForkedServer(pid: pid, connection: fd)
        } catch {
            close(fd)
            throw error
        }
    }
}

/// A server forked by the zygote: not our child, so it is watched through its connection to us,
/// which it holds open until it exits (EOF = exited; while it is open, `pid` is still that server).
final class ForkedServer: @unchecked Sendable {  // `connection` is guarded by `lock`
    let pid: pid_t
    private var connection: Int32
    private let lock = NSLock()

    init(pid: pid_t, connection: Int32) {
        self.pid = pid
        self.connection = connection
    }

    deinit { if connection >= 0 { close(connection) } }

    /// Whether it has exited: its end of the connection is closed (the check does not block).
    private func exitedLocked(waitingMilliseconds: Int32 = 0) -> Bool {
        guard connection >= 0 else { return true }
        var pollFD = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&pollFD, 1, waitingMilliseconds) > 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(connection, &byte, 1, Int32(MSG_DONTWAIT))
        if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) {
            close(connection)
            connection = -1
            return true
        }
        return false
    }

    var isRunning: Bool { lock.withLock { !exitedLocked() } }

    /// SIGTERM (the server saves its state and exits), SIGKILL after `grace`; returns once it has
    /// exited.
    func stop(grace: Duration) {
        lock.withLock {
            guard !exitedLocked() else { return }
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + grace
            while ContinuousClock.now < deadline {
                if exitedLocked(waitingMilliseconds: 50) { return }
            }
            kill(pid, SIGKILL)
            let killed = ContinuousClock.now + .seconds(10)
            while !exitedLocked(waitingMilliseconds: 50), ContinuousClock.now < killed {}
        }
    }
}
