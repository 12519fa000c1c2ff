/// What the user asked for on the command line.
enum ParsedInvocation: Sendable, Equatable {
    /// `help [COMMAND]`, `-h`, `--help`, or no command at all: show the help of `command`
    /// (`nil` for the overview of all commands).
    case help(command: String?)
    /// `--version`.
    case version
    /// A real command with its global options.
    case command(CommandInvocation)
}

/// A command to run: its parsed arguments and the global options.
struct CommandInvocation: Sendable, Equatable {
    let command: ParsedCommand
    let global: GlobalOptions
}
