import Foundation

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
func run(_ invocation: CommandInvocation, console: Console) throws -> ExitCode {
    let context = CommandContext(
        invocation: invocation, console: console, environment: ProcessInfo.processInfo.environment)
    do {
        return try dispatch(context)
    } catch let error as UsageError {
        throw error
    } catch let error as CommandFailure {
        throw error
    } catch {
        if let failure = ErrorMapping.failure(for: error) { throw failure }
        throw error
    }
}

private func dispatch(_ context: CommandContext) throws -> ExitCode {
    switch context.command.name {
    case "status": return try StoreCommands.status(context)
    case "list": return try StoreCommands.list(context)
    case "get": return try StoreCommands.get(context)
    case "put": return try StoreCommands.put(context)
    case "delete": return try StoreCommands.delete(context)
    case "state": return try StoreCommands.state(context)
    case "history": return try StoreCommands.history(context)
    case "pending": return try StoreCommands.pending(context)
    case "verify": return try MaintenanceCommands.verify(context)
    case "migrate": return try MaintenanceCommands.migrate(context)
    case "login": return try SessionCommands.login(context)
    case "token": return try SessionCommands.token(context)
    case "logout": return try SessionCommands.logout(context)
    case "resume": return try SessionCommands.resume(context)
    case "rotate-key": return try KeyCommands.rotateKey(context)
    case "unlock": return try KeyCommands.unlock(context)
    case "reset": return try KeyCommands.reset(context)
    case "destroy": return try KeyCommands.destroy(context)
    default:
        // The parser only hands over commands from the table; a new entry needs a case here.
        throw CommandFailure(.failure, "'\(context.command.name)' has no implementation")
    }
}
