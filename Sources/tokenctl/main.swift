import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

// tokenctl's entry point: parse, then show help or the version, or run the command.
// Usage errors exit 64 with the usage line; command failures exit with their own code.

// tokenctl holds secrets in memory (a revealed item, a token answer, libcurl's buffers): no
// core dump or core file, and no other process of the user may trace it or read its memory
// through /proc/PID/mem. A failure (it needs no privilege, so none is expected) is not fatal:
// `tokenctl status` reports processDumpable.
try? TokenStore.hardenProcess()

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

// Hidden generators for `make install`, from the same command table as `help`:
// `tokenctl __man` (tokenctl.1) and `tokenctl __completion bash|zsh|fish`.
// The raw argument bytes: `CommandLine.arguments` repairs invalid UTF-8 with U+FFFD, which
// would make two different account names one item. An argument that is not UTF-8 is refused
// (64) without being echoed.
let arguments: [String]
switch RawArguments.read() {
case .valid(let strings):
    arguments = strings
case .invalidUTF8(let position):
    console.writeError(
        "\(program): error: argument \(position) is not valid UTF-8; tokenctl takes names and paths as UTF-8 text\n"
            + "See '\(program) help'.\n")
    exit(ExitCode.usage.rawValue)
}
if arguments == ["__man"] {
    console.write(ManPage(root: CommandTable.root, version: CommandTable.version).render())
    exit(ExitCode.ok.rawValue)
}
if arguments.count == 2, arguments[0] == "__completion", let shell = Completions.Shell(rawValue: arguments[1]) {
    console.write(Completions(root: CommandTable.root).render(shell))
    exit(ExitCode.ok.rawValue)
}

let status: ExitCode
do {
    switch try parser.parse(arguments, environment: ProcessInfo.processInfo.environment) {
    case .help(let command) where arguments.isEmpty && command == nil:
        // Bare `tokenctl`: a short usage on stderr, as most CLIs do, and 64.
        console.writeError(helpFormatter.shortUsage())
        status = .usage
    case .help(let command):
        console.write(helpFormatter.help(forCommandNamed: command))
        status = .ok
    case .version:
        console.write(CommandTable.version + "\n")
        status = .ok
    case .command(let invocation):
        status = try await run(invocation, console: console)
    }
} catch {
    status = exitCode(for: error)
}
exit(status.rawValue)
