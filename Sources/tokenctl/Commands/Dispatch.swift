/// Runs one parsed command and returns its exit status. THE LEAD REPLACES THIS FILE with the
/// store-backed commands; parsing, help, `--version` and usage errors are handled before it
/// is called (see `main.swift`).
///
/// Contract:
/// - Write the result to `console.write` (text via `TextTable`, or one `JSONValue` document
///   when `invocation.global.json`), and anything else to `console.writeError`.
/// - Throw `CommandFailure` for an expected failure (its exit code, message and hint are
///   printed by `main.swift`); any other error is printed as `tokenctl: error: <description>`
///   with exit status 1, so its description must not contain a secret.
/// - A usage problem found only here (e.g. a value the parser cannot check) may throw
///   `UsageError`; it is printed with the usage line and exits 64.
///
/// - Throws: `CommandFailure`, `UsageError`, or any error of the store.
func run(_ invocation: CommandInvocation, console: Console) throws -> ExitCode {
    throw CommandFailure(.failure, "'\(invocation.command.name)' is not wired yet")
}
