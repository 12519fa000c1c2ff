/// A command that ran and failed, as printed to the user:
/// ```
/// tokenctl: error: <message>
/// tokenctl: hint: <hint>
/// ```
/// and exited with `exitCode`. The message and hint must never contain a secret, token,
/// account name or user id.
struct CommandFailure: Error, Sendable, Equatable {
    let exitCode: ExitCode
    let message: String
    /// One line telling the user the way forward, e.g. how to unlock the keyring.
    let hint: String?

    init(_ exitCode: ExitCode, _ message: String, hint: String? = nil) {
        self.exitCode = exitCode
        self.message = message
        self.hint = hint
    }

    /// The lines written to stderr, each ending with a newline.
    func report(program: String) -> String {
        var text = "\(program): error: \(message)\n"
        if let hint { text += "\(program): hint: \(hint)\n" }
        return text
    }
}
