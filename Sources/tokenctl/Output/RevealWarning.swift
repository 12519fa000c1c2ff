/// The warning shown on stderr before a command prints a secret (`--reveal`) to a terminal.
/// Nothing is printed when stdout is a pipe or a file: the user asked for the secret there.
enum RevealWarning {
    static let text =
        "tokenctl: warning: printing a secret to the terminal; clear the screen and the scrollback when done\n"

    /// Writes the warning to stderr when stdout is a terminal. Not silenced by `--quiet`.
    static func emitIfNeeded(on console: Console) {
        if console.standardOutputIsTerminal { console.writeError(text) }
    }
}
