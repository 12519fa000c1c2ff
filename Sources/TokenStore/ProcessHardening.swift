internal import CGlibcExtensions
#if canImport(Glibc)
import Glibc
#endif

extension TokenStore {
    /// Keeps the secrets in this process's memory out of crash dumps and away from debuggers.
    ///
    /// TokenStore keeps its own copies of secrets in guarded memory that no core dump holds.
    /// The libraries below it do not: libcurl's and OpenSSL's buffers (a request's refresh
    /// token, an answer's new one) and the app's own copies are ordinary memory. Call this once,
    /// early in `main`, to cover them too:
    ///
    /// - `prctl(PR_SET_DUMPABLE, 0)`: no core dump, and no other process of the same user may
    ///   `ptrace` this one or read its memory through `/proc/PID/mem`;
    /// - `setrlimit(RLIMIT_CORE, 0)` (soft and hard): no core file either, also for the
    ///   programs this process starts.
    ///
    /// Both stay in force for the life of the process; calling again is harmless. A debugger
    /// can then attach only with `CAP_SYS_PTRACE` (as root).
    ///
    /// - Throws: `ioError` naming the call that failed and its `errno` (no secret involved);
    ///   the other call is still made.
    public static func hardenProcess() throws(TokenStoreError) {
        let dumpable = tokenstore_set_not_dumpable() == 0 ? nil : errno
        let coreFiles = tokenstore_disable_core_files() == 0 ? nil : errno
        if let dumpable {
            throw TokenStoreError(
                .ioError, "The process could not be made non-dumpable.",
                cause: .posix(errno: dumpable, operation: "prctl(PR_SET_DUMPABLE, 0)"))
        }
        if let coreFiles {
            throw TokenStoreError(
                .ioError, "The process's core file size limit could not be set to 0.",
                cause: .posix(errno: coreFiles, operation: "setrlimit(RLIMIT_CORE, 0)"))
        }
    }
}
