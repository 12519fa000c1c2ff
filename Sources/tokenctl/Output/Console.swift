import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// Where tokenctl writes: stdout for the command's result, stderr for everything else
/// (errors, hints, warnings, progress). Writes are unbuffered so that the order of
/// stdout and stderr lines is the order of the calls.
struct Console: Sendable {
    /// Whether stdout is a terminal; decided once at start.
    let standardOutputIsTerminal: Bool
    /// Whether stderr is a terminal; decided once at start.
    let standardErrorIsTerminal: Bool
    /// Whether stdin is a terminal (a person would type a secret there); decided once at start.
    let standardInputIsTerminal: Bool

    /// The console of this process, with the terminal checks done now.
    init() {
        standardOutputIsTerminal = Terminal.standardOutputIsTerminal
        standardErrorIsTerminal = Terminal.standardErrorIsTerminal
        standardInputIsTerminal = Terminal.standardInputIsTerminal
    }

    /// Writes `text` to stdout as is (add the newline yourself).
    func write(_ text: String) {
        POSIXFile.writeAll(1, Array(text.utf8))
    }

    /// Writes a secret's bytes to stdout as they are, from its own memory (no `String` copy),
    /// and a newline after them only when stdout is a terminal (as `secret-tool lookup`).
    /// - Returns: false when stdout failed (a closed pipe, a full disk): the caller must not
    ///   report success, since the script reading it got less than the secret.
    func writeSecret(_ secret: SecretBytes) -> Bool {
        let complete = secret.withUnsafeBytes { buffer -> Bool in
            var written = 0
            while written < buffer.count {
                let n = Glibc.write(1, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                written += n
            }
            return true
        }
        if complete, standardOutputIsTerminal { write("\n") }
        return complete
    }

    /// Writes `text` to stderr as is (add the newline yourself).
    func writeError(_ text: String) {
        POSIXFile.writeAll(2, Array(text.utf8))
    }
}
