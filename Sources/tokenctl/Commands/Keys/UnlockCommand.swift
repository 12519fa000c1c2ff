import TokenStore

/// `tokenctl unlock`: asks the Secret Service to unlock the keyring, showing the desktop's prompt,
/// then unlocks the store for every process when it is locked (`tokenctl lock`).
struct UnlockCommand: TokenctlCommand {
    /// How long `unlock` waits for the user at the desktop's prompt.
    static let unlockTimeout: Duration = .seconds(120)

    static let spec = CommandSpec(
        "unlock",
        abstract: "Ask the Secret Service to unlock the keyring, showing the desktop's prompt; unlock a locked store.",
        discussion: """
            A dismissed prompt leaves the keyring locked and exits 75. A store locked with \
            'tokenctl lock' is then unlocked for every process: each fetches its data key again \
            from its provider at its next call.
            """)

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
        let storeUnlocked = try unlockStore(context)
        context.emit(["unlocked": true, "storeUnlocked": .bool(storeUnlocked)]) {
            "The keyring is unlocked.\n" + (storeUnlocked ? "The store is unlocked for every process.\n" : "")
        }
        return .ok
    }

    /// Unlocks the named store for every process when it records a lock; false when no store
    /// is named, there is none, or it is not locked.
    private func unlockStore(_ context: CommandContext) throws -> Bool {
        guard let location = try? context.storeLocation(), context.storeFileExists(location.path),
            (try? TokenStore.inspect(path: location.path))?.lockedEverywhere == true
        else { return false }
        let store = try context.openStore()
        try store.unlock(allProcesses: true)
        store.close()
        return true
    }
}
