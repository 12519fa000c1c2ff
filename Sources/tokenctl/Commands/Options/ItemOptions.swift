import TokenStore

/// `--account`, `--kind`, `--service`: the item a command works on. Shared by the item
/// commands, as swift-argument-parser shares an `@OptionGroup`.
struct ItemOptions: Sendable {
    static let account = OptionSpec.value(
        "account", "account", required: true, "The account the item belongs to.")
    static let kind = OptionSpec.value(
        "kind", "kind", rule: .oneOf(CommandTable.itemKinds),
        "The kind of item (default: generic, a plain secret, as secret-tool stores one).")
    /// The kind of an item command given no --kind.
    static let defaultKind = ItemKind.generic
    static let service = OptionSpec.value(
        "service", "service",
        "The service the item belongs to, when the store holds several (default: the default service, shown as '(default)'; stored as 'auth0').")

    /// The group's options, in the order the help shows them.
    static let specs = [account, kind, service]

    let key: ItemKey

    /// - Throws: `UsageError` for a missing account, or a kind that is not an `ItemKind`.
    init(_ parsed: ParsedCommand) throws(UsageError) {
        let account = try parsed.requiredValue(Self.account)
        guard let kind = parsed.value(Self.kind).map(ItemKind.init(rawValue:)) ?? Self.defaultKind else {
            throw UsageError(
                kind: .invalidValue(
                    option: Self.kind.synopsis, environmentVariable: nil, expectation: Self.kind.rule.expectation),
                commandName: parsed.name)
        }
        key = ItemKey(account: AccountID(account, service: parsed.value(Self.service) ?? AccountID.defaultService), kind: kind)
    }
}
