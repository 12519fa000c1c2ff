import TokenStore

/// `tokenctl polkit-action [--name NAME]`: prints the polkit action file of the named store's
/// app id, for an app's package (what a `userPresence` store asks polkit for).
struct PolkitActionCommand: TokenctlCommand {
    static let name = OptionSpec.value(
        "name", "name", "The app's name in polkit's dialog (default: the app id).")

    static let spec = CommandSpec(
        "polkit-action",
        abstract: "Print the polkit action file a userPresence store of the app id needs.",
        discussion: """
            The file declares the action APP-ID.tokenstore.read (the app id lowercased, other \
            characters than a-z, 0-9, '.', '-' as '-'), auth_self, which a userPresence store \
            asks polkit for before a gated read. An app's package installs it as \
            /usr/share/polkit-1/actions/ACTION-ID.policy (stderr names the file; --json gives \
            actionID, file and policy). \
            Nothing is opened or created; the app id comes from --app-id, or from the path as \
            every command derives it.
            """,
        options: [name])

    let appName: String?

    init(parsed: ParsedCommand) throws {
        appName = parsed.value(Self.name)
        // XML 1.0 has no control characters, and polkit's dialog shows one line.
        if let appName, appName.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw UsageError(
                kind: .invalidValue(option: Self.name.synopsis, environmentVariable: nil, expectation: "expected a name without control characters"),
                commandName: Self.spec.name)
        }
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let appID = try context.storeLocation().appID
        let text = PolkitActionFile.text(appID: appID, appName: appName ?? appID)
        context.note("install it as /usr/share/polkit-1/actions/\(PolkitActionFile.fileName(appID: appID))")
        context.emit(["actionID": .string(PolkitActionFile.actionID(appID: appID)), "file": .string(PolkitActionFile.fileName(appID: appID)), "policy": .string(text)]) { text }
        return .ok
    }
}
