import TokenStore

/// `tokenctl list`: the items, never a secret.
struct ListCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "list",
        abstract: "List the items: account, kind, created, updated, fingerprint; never the secret.")

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        var items: [ItemInfo] = []
        try store.forEachItem { items.append($0) }
        items.sort { ($0.key.account.service, $0.key.account.name, $0.key.kind.rawValue) < ($1.key.account.service, $1.key.account.name, $1.key.kind.rawValue) }
        context.emit(["count": .int(items.count), "items": .array(items.map { .object(ItemDocument.fields(of: $0)) })]) {
            var table = TextTable(header: ["SERVICE", "ACCOUNT", "KIND", "CREATED", "UPDATED", "FINGERPRINT", "BYTES"])
            table.alignments = [.left, .left, .left, .left, .left, .left, .right]
            for item in items {
                table.append([
                    Format.service(item.key.account.service), item.key.account.name, item.key.kind.rawValue, Format.date(item.createdAt),
                    Format.date(item.updatedAt), item.fingerprint, String(item.byteCount),
                ])
            }
            return items.isEmpty ? "No items.\n" : table.rendered()
        }
        return .ok
    }
}
