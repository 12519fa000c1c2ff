import Foundation

// tokenctl's entry point: parse, then show help or the version, or run the command.
// Usage errors exit 64 with the usage line; command failures exit with their own code.

let console = Console()
let helpFormatter = HelpFormatter(root: CommandTable.root)
let parser = InvocationParser(root: CommandTable.root)
let program = CommandTable.root.name

func exitCode(for error: any Error) -> ExitCode {
    switch error {
    case let usageError as UsageError:
        console.writeError(helpFormatter.report(usageError))
        return .usage
    case let failure as CommandFailure:
        console.writeError(failure.report(program: program))
        return failure.exitCode
    default:
        console.writeError("\(program): error: \(error)\n")
        return .failure
    }
}

let status: ExitCode
do {
    switch try parser.parse(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment) {
    case .help(let command):
        console.write(helpFormatter.help(forCommandNamed: command))
        status = .ok
    case .version:
        console.write(CommandTable.version + "\n")
        status = .ok
    case .command(let invocation):
        status = try run(invocation, console: console)
    }
} catch {
    status = exitCode(for: error)
}
exit(status.rawValue)
