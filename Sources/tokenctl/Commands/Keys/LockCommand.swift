import TokenStore

/// `tokenctl lock`: locks the store for every process that has it open, until `tokenctl unlock`.
struct LockCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "lock",
        abstract: "Lock the store for every process: each drops its data key at its next call.",
        discussion: """
            The store records the lock under its MAC. Every process that has the store open wipes \
            its data key from memory at its next call, and every read or write fails with \
            storeLocked (exit 75) until 'tokenctl unlock', which fetches the key again from its \
            provider. Works under every access policy; no daemon is involved.
            """)

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        try store.lock(allProcesses: true)
        store.close()
        context.emit(["locked": true]) { "The store is locked for every process until 'tokenctl unlock'.\n" }
        return .ok
    }
}
