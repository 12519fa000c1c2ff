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
        do {
            try provider.unlockDefaultCollection(timeout: Self.unlockTimeout)
        } catch let error as TokenStoreError where error.code == .keyringLocked {
            // The usual hint ("run 'tokenctl unlock'") would send the user back here.
            throw CommandFailure(
                .tempFailure, "\(error.message) [\(error.code.rawValue)]",
                hint: "the unlock prompt needs the desktop session: log in to the desktop (that unlocks the login "
                    + "keyring), or unlock it in the desktop's password manager (e.g. Seahorse), then try again")
        }
        context.emit(["unlocked": true]) { "The keyring is unlocked.\n" }
        return .ok
    }
}
