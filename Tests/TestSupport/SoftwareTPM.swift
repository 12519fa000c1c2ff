import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A software TPM 2.0 (`swtpm socket`) on loopback TCP for one test: its own state directory,
/// two free ports (the TPM and its control channel), started with `startup-clear` so it is
/// ready at once, no root and no `/dev/tpm*`. Stopped (and its state removed) by ``stop()`` or
/// when the value is released.
///
/// ```swift
/// let tpm = try SoftwareTPM.start()
/// let provider = TPMKeyProvider(tcti: tpm.tcti)
/// ```
public final class SoftwareTPM: @unchecked Sendable {  // immutable after init; stop() is idempotent through ChildProcess
    /// The TCTI configuration reaching it, for `TOKENSTORE_TPM_TCTI` or `TPMKeyProvider(tcti:)`.
    public let tcti: String
    /// The TPM's command port on 127.0.0.1 (the control port is the next one).
    public let port: UInt16
    /// The directory holding the TPM's state (its seeds: another directory is another TPM).
    public let stateDirectory: TemporaryDirectory
    private let process: ChildProcess

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Whether `swtpm` is installed (scripts/install-deps installs it).
    public static var isInstalled: Bool {
        let paths: [String] = ["/usr/bin/swtpm", "/usr/local/bin/swtpm"]
        return paths.contains { path in access(path, X_OK) == 0 }
    }

    /// Starts a new software TPM with a fresh state, or with `state` (a second start of the same TPM).
    /// `startupClear: false` leaves it unstarted, as a TPM no firmware started: it answers every
    /// command TPM_RC_INITIALIZE until it gets TPM2_Startup.
    /// - Throws: ``Unavailable`` when swtpm is missing or does not answer within 10 s.
    public static func start(state: TemporaryDirectory? = nil, startupClear: Bool = true) throws -> SoftwareTPM {
        guard isInstalled else { throw Unavailable(description: "swtpm is not installed (run scripts/install-deps)") }
        let directory = try state ?? TemporaryDirectory(prefix: "tokenstore-swtpm")
        // One start at a time in this process: two starts side by side could each be given the
        // other's control port (P+1) as a server port, and a test would then talk to the other
        // swtpm's control channel, which never answers a TPM command (seen as "did not answer
        // within 10 s" with the TPM suites in parallel). Under the lock, the ports are bound by
        // swtpm before the next start asks the kernel for free ones.
        startLock.lock()
        defer { startLock.unlock() }
        for _ in 0..<20 {
            let port = try LoopbackPorts.free(1)[0]
            guard port < UInt16.max, LoopbackPorts.isBindable(port + 1) else { continue }
            let process = try ChildProcess.start(
                "swtpm",
                [
                    "socket", "--tpm2", "--tpmstate", "dir=\(directory.path)",
                    "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                    "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                    "--flags", startupClear ? "not-need-init,startup-clear" : "not-need-init",
                ],
                standardOutput: .discard, standardError: .capture)
            // Listening on P is not enough: a port taken by another program between the check and
            // swtpm's bind makes swtpm exit, so it must still run, with both ports bound, a moment later.
            if waitUntilListening(port, process) {
                usleep(50_000)
                if process.isRunning, !LoopbackPorts.isBindable(port + 1) {
                    return SoftwareTPM(port: port, state: directory, process: process)
                }
            }
            _ = process.stop()
        }
        throw Unavailable(description: "swtpm did not start listening on a free loopback port")
    }

    private static let startLock = NSLock()

    private init(port: UInt16, state: TemporaryDirectory, process: ChildProcess) {
        self.port = port
        self.tcti = "swtpm:host=127.0.0.1,port=\(port)"
        self.stateDirectory = state
        self.process = process
    }

    deinit { _ = process.stop() }

    /// Stops the TPM (its state directory stays until this value is released).
    public func stop() { _ = process.stop() }

    /// Sends `number` to the swtpm process: `SIGSTOP` makes a TPM that accepts connections
    /// (the kernel completes them) and never answers; `SIGCONT` lets it go on.
    public func signal(_ number: Int32) { process.signal(number) }

    /// Runs `body` on a thread of its own and waits for it at most `bound`: the result, or nil
    /// when it has not returned by then (a hang; the thread is left to finish on its own).
    public static func bounded<T: Sendable>(_ bound: Duration, _ body: @escaping @Sendable () -> T) -> (value: T?, elapsed: Duration) {
        let done = DispatchSemaphore(value: 0)
        let box = Box<T>()
        let start = ContinuousClock.now
        Thread.detachNewThread {
            box.value = body()
            done.signal()
        }
        let (seconds, attoseconds) = bound.components
        let finished = done.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))) == .success
        return (finished ? box.value : nil, ContinuousClock.now - start)
    }

    private final class Box<T>: @unchecked Sendable {  // written before `done` is signalled, read after
        var value: T?
    }

    /// The transient objects the TPM holds now (`tpm2_getcap handles-transient`): 0 when every
    /// path flushed what it made (swtpm has no resource manager: nothing is flushed for us).
    public func transientHandleCount() throws -> Int {
        let result = try ChildProcess.run("tpm2_getcap", ["-T", tcti, "handles-transient"], timeout: .seconds(30))
        guard result.termination.code == 0 else {
            throw Unavailable(description: "tpm2_getcap failed: \(result.standardErrorText)")
        }
        return result.standardOutputText.split(separator: "\n").filter { $0.contains("0x80") }.count
    }

    /// A TCTI naming a loopback port nobody listens on: an unreachable TPM.
    public static func unreachableTCTI() throws -> String {
        "swtpm:host=127.0.0.1,port=\(try LoopbackPorts.free(1)[0])"
    }

    /// Polls for the command port's listener (a connect that succeeds; the connection closed at once).
    private static func waitUntilListening(_ port: UInt16, _ process: ChildProcess) -> Bool {
        let deadline = monotonicNanoseconds() + 10_000_000_000
        while monotonicNanoseconds() < deadline {
            if process.poll() != nil { return false }
            if LoopbackPorts.isBindable(port) == false, connects(port) { return true }
            usleep(20_000)
        }
        return false
    }

    private static func connects(_ port: UInt16) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) == 0 }
        }
    }
}
