import TokenStore

/// `tokenctl destroy --yes`: deletes the store's database and its key items.
struct DestroyCommand: TokenctlCommand {
    static let yes = OptionSpec.flag("yes", required: true, "Confirm that the store is to be destroyed.")

    static let spec = CommandSpec(
        "destroy",
        abstract: "Delete the store's database and its key items.",
        discussion: "Warning: everything in the store is lost, including the history.",
        options: [yes])

    /// `--yes` is required by the parser already; checked again because the command destroys data.
    init(parsed: ParsedCommand) throws {
        try parsed.requireFlag(Self.yes)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        try TokenStore.destroyStore(
            path: location.path, appID: location.appID, keyProvider: context.keyProvider(storePath: location.path),
            confirm: .yesDestroyEverything)
        context.emit(["destroyed": true, "path": .string(location.path)]) { "Destroyed the store and its data keys.\n" }
        return .ok
    }
}
