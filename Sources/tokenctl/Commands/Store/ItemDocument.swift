import FoundationEssentials
import TokenStore

/// An item's metadata as `list` and `get` print it with `--json`: the keys are written once
/// here. Never the secret.
enum ItemDocument {
    static func fields(of item: ItemInfo) -> [String: JSONValue] {
        fields(
            item.key, item.attributes, createdAt: item.createdAt, updatedAt: item.updatedAt,
            fingerprint: item.fingerprint, byteCount: item.byteCount)
    }

    static func fields(of item: StoredItem) -> [String: JSONValue] {
        fields(
            item.key, item.attributes, createdAt: item.createdAt, updatedAt: item.updatedAt,
            fingerprint: item.fingerprint, byteCount: item.secret.count)
    }

    private static func fields(
        _ key: ItemKey, _ attributes: ItemAttributes, createdAt: Date, updatedAt: Date, fingerprint: String,
        byteCount: Int
    ) -> [String: JSONValue] {
        [
            "service": .string(key.account.service), "account": .string(key.account.name),
            "kind": .string(key.kind.rawValue), "label": Format.optional(attributes.label),
            "createdAt": .string(Format.date(createdAt)), "updatedAt": .string(Format.date(updatedAt)),
            "expiresAt": Format.date(attributes.expiresAt), "scopes": Format.strings(attributes.scopes),
            "fingerprint": .string(fingerprint), "byteCount": .int(byteCount),
        ]
    }
}
