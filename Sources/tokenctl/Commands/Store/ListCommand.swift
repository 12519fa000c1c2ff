import TokenStore

/// `tokenctl list`: the items, never a secret.
struct ListCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "list",
        abstract: "List the items: account, kind, created, updated, fingerprint; never the secret.")

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        var items: [ItemInfo] = []
        try store.forEachItem { items.append($0) }
        items.sort { ($0.key.service, $0.key.account, $0.key.kind.rawValue) < ($1.key.service, $1.key.account, $1.key.kind.rawValue) }
        context.emit(["count": .int(items.count), "items": .array(items.map { .object(ItemDocument.fields(of: $0)) })]) {
            var table = TextTable(header: ["SERVICE", "ACCOUNT", "KIND", "CREATED", "UPDATED", "FINGERPRINT", "BYTES"])
            table.alignments = [.left, .left, .left, .left, .left, .left, .right]
            for item in items {
                table.append([
                    item.key.service, item.key.account, item.key.kind.rawValue, Format.date(item.createdAt),
                    Format.date(item.updatedAt), item.fingerprint, String(item.byteCount),
                ])
            }
            return items.isEmpty ? "No items.\n" : table.rendered()
        }
        return .ok
    }
}
