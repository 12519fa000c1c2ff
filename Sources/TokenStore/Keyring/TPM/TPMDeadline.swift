import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Runs one TPM session on a thread of its own and waits for it at most a time-out, because
/// tpm2-tss cannot bound a command itself here: ESYS's synchronous calls wait without limit
/// (`Esys_SetTimeout` applies only to the `_Finish` calls of its asynchronous API), the swtpm
/// TCTI of tpm2-tss 3.2 ignores the receive time-out ("asynchronous I/O not actually
/// implemented") and has no poll handles, and its initialization already waits on swtpm's
/// control channel. A TPM that accepts the connection and never answers (a stopped swtpm, a
/// hung simulator or proxy) would otherwise hang a store's open or a DPoP proof for good.
///
/// When the time-out passes the caller gets `tpmUnavailable` ("did not answer within 10 s") and
/// the session is abandoned, not killed: its thread still holds that TPM's lock and connection,
/// and when the TPM answers (or the connection drops) it finishes its work, flushes what it
/// made and closes. Until then a new session for that TPM fails at once instead of queueing
/// behind it: one waiting thread per silent TPM, not one per call.
///
/// The thread and the abandonment are ``DeadlineThread``'s; what is the TPM's is the count of
/// abandoned sessions per TCTI and the error texts.
enum TPMDeadline {
    /// Abandoned sessions not finished yet, per TCTI.
    private static let abandoned = Locked([String: Int]())

    /// `work` (a whole TPM session) on a new thread, its result if it returns within `timeout`.
    /// - Throws: what `work` returned as a failure; `tpmUnavailable` when it did not return in
    ///   time, or when an earlier session for `tcti` timed out and has not finished yet.
    static func run<R>(
        tcti: String, timeout: Duration, _ work: @escaping () -> Result<R, TokenStoreError>
    ) throws(TokenStoreError) -> R {
        if abandoned.withLock({ $0[tcti, default: 0] > 0 }) { throw timedOut(tcti, timeout, earlier: true) }
        let outcome = DeadlineThread.run(
            name: "tokenstore-tpm", timeout: timeout,
            onAbandon: { abandoned.withLock { $0[tcti, default: 0] += 1 } },
            onLate: { finished(tcti: tcti) }, work)
        switch outcome {
        case .finished(let result): return try result.get()
        case .timedOut: throw timedOut(tcti, timeout, earlier: false)
        case .noThread: return try work().get()  // no thread to be had: run here, unbounded
        }
    }

    private static func timedOut(_ tcti: String, _ timeout: Duration, earlier: Bool) -> TokenStoreError {
        let milliseconds = timeout.wholeMilliseconds
        let span = milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
        let detail = earlier ? "an earlier command to it timed out and is still unanswered" : "timed out"
        return TokenStoreError(
            .tpmUnavailable, "No usable TPM: \(TPMDiagnosis.naming(tcti)) did not answer within \(span) (\(detail)).",
            hint: "Check that the TPM named by TOKENSTORE_TPM_TCTI is running and not stopped or overloaded.",
            cause: .other("TPM time-out"))
    }

    /// Called by an abandoned session's thread when its work has returned.
    private static func finished(tcti: String) {
        abandoned.withLock { counts in
            counts[tcti, default: 1] -= 1
            if counts[tcti] == 0 { counts[tcti] = nil }
        }
    }
}
