import TokenStore

/// The access-policy names tokenctl accepts (`--access-policy`, `policy set`).
enum AccessPolicyArgument {
    static let expectation =
        "expected afterFirstUnlock, whenUnlocked, userPresence, userPresence:session:SECONDS or userPresence:appLifecycle:SECONDS"

    /// The policy `text` names.
    /// - Throws: `UsageError` (64) for a name that is not a policy.
    static func parse(_ text: String, option: String) throws -> AccessPolicy {
        guard let policy = AccessPolicy(name: text) else {
            throw UsageError(kind: .invalidValue(option: option, environmentVariable: nil, expectation: expectation), commandName: nil)
        }
        return policy
    }
}

/// `tokenctl policy set NAME`: records the store's access policy, weaker or stronger.
struct PolicyCommand: TokenctlCommand {
    static let action = PositionalSpec("action", "set: record NAME as the store's access policy.")
    static let name = PositionalSpec("name", "afterFirstUnlock, whenUnlocked, userPresence, userPresence:session:SECONDS, userPresence:appLifecycle:SECONDS.")

    static let spec = CommandSpec(
        "policy",
        abstract: "Set the store's access policy: when its secrets may be read.",
        discussion: """
            The policy is recorded in the store under its MAC; an open asking for a weaker one \
            does not lower it, this command does. A policy this tokenctl cannot enforce is \
            refused and nothing changes: whenUnlocked where neither logind nor a screensaver \
            says when the desktop session locks exits 69 (lockSourceUnavailable). A whenUnlocked \
            store is locked while the session is (storeLocked, 75). Under userPresence, reading \
            the refresh token or a generic item first asks polkit for the action \
            APP-ID.tokenstore.read (the app id lowercased, other characters than a-z, 0-9, '.', \
            '-' as '-'); denied or dismissed exits 75 (userPresenceDenied), no polkit on the \
            system bus 69 (lockSourceUnavailable). Lowering a userPresence policy asks too.
            """,
        positionals: [action, name])

    let policy: AccessPolicy

    init(parsed: ParsedCommand) throws {
        let verb = try parsed.requiredArgument(Self.action)
        guard verb == "set" else {
            throw UsageError(kind: .invalidValue(option: "<action>", environmentVariable: nil, expectation: "expected set"), commandName: "policy")
        }
        policy = try AccessPolicyArgument.parse(try parsed.requiredArgument(Self.name), option: "<name>")
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        try store.setAccessPolicy(policy)
        store.close()
        context.emit(["accessPolicy": .string(policy.name)]) { "The store's access policy is \(policy.name).\n" }
        return .ok
    }
}
