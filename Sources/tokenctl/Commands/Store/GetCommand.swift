import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// `tokenctl get`: one item's metadata and fingerprint; the secret only with `--reveal`.
struct GetCommand: TokenctlCommand {
    static let reveal = OptionSpec.flag("reveal", "Also print the secret. Warns on stderr when stdout is a terminal.")
    static let raw = OptionSpec.flag(
        "raw",
        "Print only the secret's bytes, nothing else (for scripts: SECRET=$(tokenctl get --raw ...)); a newline follows only on a terminal. Warns on stderr when stdout is a terminal.")

    static let spec = CommandSpec(
        "get",
        abstract: "Show one item's metadata and fingerprint; the secret only with --reveal or --raw.",
        discussion: """
            With --raw, stdout carries the secret alone, byte for byte, as secret-tool lookup \
            prints it; an absent item exits 1 and prints nothing on stdout.

              S=$(tokenctl --app-id org.example.notes get --account alice --raw)
            """,
        options: ItemOptions.specs + [reveal, raw])

    let key: ItemKey
    let reveal: Bool
    let raw: Bool

    init(parsed: ParsedCommand) throws {
        key = try ItemOptions(parsed).key
        reveal = parsed.isSet(Self.reveal)
        raw = parsed.isSet(Self.raw)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        if raw, context.json {
            throw CommandFailure(.usage, "--raw prints the secret alone and cannot be combined with --json")
        }
        let store = try context.openStore(readOnly: true)
        guard let item = try store.item(for: key) else {
            throw CommandFailure(.failure, "no item with this account, kind and service", hint: "'tokenctl list' shows the items")
        }
        if raw {
            RevealWarning.emitIfNeeded(on: context.console)
            guard context.console.writeSecret(item.secret) else {
                throw CommandFailure(.failure, "writing the secret to stdout failed (\(String(cString: strerror(errno))))")
            }
            return .ok
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
            table.append(["service", Format.service(item.key.account.service)])
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
