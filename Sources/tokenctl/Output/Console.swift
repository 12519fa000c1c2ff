import FoundationEssentials
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

    /// Writes `text` to stderr as is (add the newline yourself).
    func writeError(_ text: String) {
        POSIXFile.writeAll(2, Array(text.utf8))
    }
}
