import TokenStore

/// `tokenctl unlock`: asks the Secret Service to unlock the keyring, showing the desktop's prompt.
struct UnlockCommand: TokenctlCommand {
    /// How long `unlock` waits for the user at the desktop's prompt.
    static let unlockTimeout: Duration = .seconds(120)

    static let spec = CommandSpec(
        "unlock",
        abstract: "Ask the Secret Service to unlock the keyring, showing the desktop's prompt.",
        discussion: "A dismissed prompt leaves the keyring locked and exits 75.")

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let provider = SecretServiceKeyProvider()
        context.note("asking the Secret Service to unlock the keyring (the desktop may show a prompt)")
        try provider.unlockDefaultCollection(timeout: Self.unlockTimeout)
        context.emit(["unlocked": true]) { "The keyring is unlocked.\n" }
        return .ok
    }
}
