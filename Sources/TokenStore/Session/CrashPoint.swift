#if canImport(Glibc)
import Glibc
#endif

/// Named places where a test can make the process die, to prove crash safety.
///
/// Compiled in only in debug builds: a child process started with
/// `TOKENSTORE_CRASH_POINT=<name>` writes `crash point reached: <name>` to standard error and
/// kills itself with SIGKILL when it reaches that point, so a test can tell a death at the
/// point from any other. `TOKENSTORE_STOP_POINT=<name>` instead writes `stop point reached: <name>`
/// and stops the process (SIGSTOP) there, holding whatever it holds, until it gets SIGCONT: a
/// process that is slow at that point. It stops there once: a point reached again (a key
/// rotation's `rotate.afterBatch`, once per sealed table) is passed, so one SIGCONT lets the
/// process run to its end. Release builds contain no hook.
package enum CrashPoint {
    #if DEBUG
    private static let armed: String? = getenv("TOKENSTORE_CRASH_POINT").map { String(cString: $0) }
    private static let stopAt: String? = getenv("TOKENSTORE_STOP_POINT").map { String(cString: $0) }
    private static let stopped = Locked(false)
    #endif

    /// Dies (or stops) here if this point is armed (debug builds only).
    @inline(__always)
    package static func reach(_ name: StaticString) {
        #if DEBUG
        if let armed, armed == name.description {
            let line = Array("crash point reached: \(armed)\n".utf8)
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            kill(getpid(), SIGKILL)
        }
        if let stopAt, stopAt == name.description, stopped.withLock({ stopped in defer { stopped = true }; return !stopped }) {
            let line = Array("stop point reached: \(stopAt)\n".utf8)
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            kill(getpid(), SIGSTOP)
        }
        #endif
    }
}
