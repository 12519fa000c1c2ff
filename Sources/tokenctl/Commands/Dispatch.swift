import FoundationEssentials

/// Runs one parsed command and returns its exit status. Parsing, help, `--version` and
/// usage errors are handled before it is called (see `main.swift`).
///
/// Contract:
/// - The result goes to `console.write` (text via `TextTable`, or one `JSONValue` document
///   when `--json` is given); anything else to `console.writeError`.
/// - An expected failure is thrown as `CommandFailure` (exit code, message, hint); errors of
///   the store and the session layer are mapped by `ErrorMapping`. On failure nothing is
///   written to stdout, also with `--json`.
/// - A usage problem found only here throws `UsageError` (printed with the usage line, exit 64).
///
/// - Throws: `CommandFailure`, `UsageError`, or an error whose description holds no secret.
@MainActor
func run(_ invocation: CommandInvocation, console: Console) async throws -> ExitCode {
    let context = CommandContext(
        global: invocation.global, console: console, environment: ProcessInfo.processInfo.environment)
    do {
        // The parser only hands over commands of the table, so the lookup cannot miss.
        guard let type = CommandTable.command(named: invocation.command.name) else {
            throw CommandFailure(.failure, "'\(invocation.command.name)' has no implementation")
        }
        return try await type.init(parsed: invocation.command).run(context)
    } catch let error as UsageError {
        throw error
    } catch let error as CommandFailure {
        throw error
    } catch {
        // With --verbose, the attached cause (errno, SQLite, GLib: never a secret) goes first.
        if context.global.verbose, let cause = ErrorMapping.cause(of: error) {
            console.writeError("\(CommandTable.root.name): cause: \(cause)\n")
        }
        if let failure = ErrorMapping.failure(for: error) { throw failure }
        throw error
    }
}
