import FoundationEssentials
import TokenStore

/// `tokenctl get`: one item's metadata and fingerprint; the secret only with `--reveal`.
struct GetCommand: TokenctlCommand {
    static let reveal = OptionSpec.flag("reveal", "Also print the secret. Warns on stderr when stdout is a terminal.")

    static let spec = CommandSpec(
        "get",
        abstract: "Show one item's metadata and fingerprint; the secret only with --reveal.",
        options: ItemOptions.specs + [reveal])

    let key: ItemKey
    let reveal: Bool

    init(parsed: ParsedCommand) throws {
        key = try ItemOptions(parsed).key
        reveal = parsed.isSet(Self.reveal)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        guard let item = try store.item(for: key) else {
            throw CommandFailure(.failure, "no item with this account, kind and service", hint: "'tokenctl list' shows the items")
        }
        var document = ItemDocument.fields(of: item)
        var text: String?
        if reveal {
            RevealWarning.emitIfNeeded(on: context.console)
            // The secret becomes a String only here, at the edge, because the user asked for it.
            text = item.secret.stringValue()
            document["secret"] = Format.optional(text)
            document["secretBase64"] = .string(Data(item.secret.copyBytes()).base64EncodedString())
        }
        context.emit(.object(document)) {
            var table = TextTable(header: nil)
            table.append(["service", item.key.account.service])
            table.append(["account", item.key.account.name])
            table.append(["kind", item.key.kind.rawValue])
            if let label = item.attributes.label { table.append(["label", label]) }
            table.append(["created", Format.date(item.createdAt)])
            table.append(["updated", Format.date(item.updatedAt)])
            if let expiresAt = item.attributes.expiresAt { table.append(["expires", Format.date(expiresAt)]) }
            if !item.attributes.scopes.isEmpty { table.append(["scopes", item.attributes.scopes.joined(separator: " ")]) }
            table.append(["fingerprint", item.fingerprint])
            table.append(["bytes", String(item.secret.count)])
            if reveal {
                if let text {
                    table.append(["secret", text])
                } else {
                    table.append(["secret (base64)", Data(item.secret.copyBytes()).base64EncodedString()])
                }
            }
            return table.rendered()
        }
        return .ok
    }
}
