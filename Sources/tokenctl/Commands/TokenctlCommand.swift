/// One tokenctl command in one type: its declaration, its arguments read once into typed
/// properties, and what it does. The shape of swift-argument-parser's `ParsableCommand`:
///
/// ```swift
/// struct PutCommand: TokenctlCommand {
///     static let label = OptionSpec.value("label", "label", "A label for people.")
///     static let spec = CommandSpec("put", abstract: "Store a secret.", options: ItemOptions.specs + [label])
///
///     let key: ItemKey
///     let label: String?
///
///     init(parsed: ParsedCommand) throws {
///         key = try ItemOptions(parsed).key
///         label = parsed.value(Self.label)
///     }
///
///     func run(_ context: CommandContext) throws -> ExitCode { … }  // or `async throws`
/// }
/// ```
///
/// Options are read through the same `OptionSpec` constants the spec lists, so an option's
/// name is written once. A new command is one such type, listed in `CommandTable.commands`.
protocol TokenctlCommand: Sendable {
    /// The name, help texts, options and arguments: what the parser and the help screens read.
    static var spec: CommandSpec { get }

    /// Reads the parsed arguments into the command's properties; nothing is opened or read yet.
    /// - Throws: `UsageError` for an argument the parser could not judge (e.g. an insecure server URL).
    init(parsed: ParsedCommand) throws

    /// Runs the command and returns its exit status; see `run(_:console:)` for the contract.
    /// A command that waits on the session layer is `async` and awaits it; the others are
    /// synchronous and run on the main thread, as the requirement is the main actor's.
    /// - Throws: `CommandFailure`, `UsageError`, or an error of the store or the session layer.
    @MainActor func run(_ context: CommandContext) async throws -> ExitCode
}
