import TokenStore

/// `tokenctl delete`: deletes one item; succeeds when it is already gone.
struct DeleteCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "delete",
        abstract: "Delete one item. Succeeds when the item is already gone.",
        options: ItemOptions.specs)

    let key: ItemKey

    init(parsed: ParsedCommand) throws {
        key = try ItemOptions(parsed).key
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        // Counting, not reading: a damaged row must stay deletable.
        let before = try store.counts().items
        try store.delete(key)
        let deleted = try store.counts().items < before
        context.emit(["deleted": .bool(deleted), "service": .string(key.account.service), "account": .string(key.account.name), "kind": .string(key.kind.rawValue)]) {
            deleted ? "Deleted.\n" : "Nothing to delete: no such item.\n"
        }
        return .ok
    }
}
