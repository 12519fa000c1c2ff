import TokenStore

/// `tokenctl put`: stores a secret read from stdin, never from an argument. The only item
/// command that creates the store.
struct PutCommand: TokenctlCommand {
    static let label = OptionSpec.value("label", "label", "A label for people; not secret, not unique.")
    static let accessPolicy = OptionSpec.value(
        "access-policy", "name",
        "The access policy of a store this put creates (or a stronger one for an existing store): afterFirstUnlock (default), whenUnlocked, userPresence[:session|appLifecycle:SECONDS].")

    static let spec = CommandSpec(
        "put",
        abstract: "Store a secret read from stdin.",
        discussion: """
            The secret is read from stdin, never from an argument, so that it stays out of the \
            shell history and the process list. A trailing newline is removed. Where no store is \
            yet, put makes one and says so on stderr.

              printf '%s' "$TOKEN" | tokenctl --app-id org.example.notes put --account alice

            Without --kind the item is a generic secret.
            """,
        options: ItemOptions.specs + [label, accessPolicy])

    let key: ItemKey
    let label: String?
    let policy: AccessPolicy?

    init(parsed: ParsedCommand) throws {
        key = try ItemOptions(parsed).key
        label = parsed.value(Self.label)
        policy = try parsed.value(Self.accessPolicy).map { try AccessPolicyArgument.parse($0, option: Self.accessPolicy.synopsis) }
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        if context.console.standardInputIsTerminal {
            context.console.writeError("tokenctl: reading the secret from stdin; end it with Ctrl-D\n")
        }
        let secret = try SecretInput.standardInput()
        let location = try context.checkedStoreLocation()
        let newStore = NewStoreNote(path: location.path)
        let store: TokenStore
        do {
            store = try context.openStore(create: true, announcesNewStore: false, accessPolicy: policy)
        } catch let error as TokenStoreError where error.code == .diskFull {
            // A disk too small for the new store's own tables: nothing half made is left either.
            if newStore.removeStoreOfFailedOpen(path: location.path, appID: location.appID) {
                context.console.writeError("tokenctl: note: the new store this put had made was removed again; nothing was stored\n")
            }
            throw error
        }
        do {
            try store.set(secret, for: key, attributes: ItemAttributes(label: label))
        } catch {
            // A first write that fails (a full disk) leaves no empty store and no key behind.
            if newStore.removeCreatedStore(store) {
                context.console.writeError("tokenctl: note: the new store this put had made was removed again; nothing was stored\n")
            }
            throw error
        }
        for line in newStore.lines(path: store.path) ?? [] { context.console.writeError("tokenctl: \(line)\n") }
        let fingerprint = store.fingerprint(of: secret)
        let document: JSONValue = [
            "stored": true, "service": .string(key.account.service), "account": .string(key.account.name),
            "kind": .string(key.kind.rawValue), "fingerprint": .string(fingerprint),
            "byteCount": .int(secret.count),
        ]
        // The confirmation is an informational line: --quiet silences it (--json still prints its document).
        if context.global.quiet && !context.json { return .ok }
        context.emit(document) { "Stored \(key.kind.rawValue) (\(secret.count) bytes, fingerprint \(fingerprint)).\n" }
        return .ok
    }
}
