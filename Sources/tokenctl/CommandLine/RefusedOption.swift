/// An option tokenctl refuses on purpose because its value would be a secret on the command
/// line: every local user can read a process's arguments (`/proc/PID/cmdline`), and the shell
/// keeps them in its history. The parser rejects it with a hint naming the safe way (stdin);
/// help never shows it.
///
/// ```swift
/// static let appleCode = RefusedOption(
///     "apple-code", secret: "the authorization code",
///     hint: "read it from standard input: printf '%s' \"$CODE\" | tokenctl login --account A")
/// ```
struct RefusedOption: Sendable, Equatable {
    /// The long name without dashes, e.g. `apple-code`.
    let name: String
    /// What the value would be, for the error message, e.g. `the authorization code`.
    let secret: String
    /// One line telling the safe way to pass the secret.
    let hint: String

    init(_ name: String, secret: String, hint: String) {
        self.name = name
        self.secret = secret
        self.hint = hint
    }

    var longSpelling: String { "--\(name)" }
}
