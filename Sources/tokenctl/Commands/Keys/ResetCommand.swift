import TokenStore

/// `tokenctl reset --yes`: destroys the sealed items after the data key was lost; keeps the history.
struct ResetCommand: TokenctlCommand {
    static let yes = OptionSpec.flag("yes", required: true, "Confirm that the sealed items are to be destroyed.")
    static let force = OptionSpec.flag(
        "force", "Reset even though the store has other key slots (a recovery key, a passphrase, another provider) that may open it.")

    static let spec = CommandSpec(
        "reset",
        abstract: "Destroy the sealed items after the data key was lost; keep the history.",
        discussion: """
            Warning: every stored secret is deleted. The credential-state history is kept, \
            with each user marked revoked (reason keyLost); pending revocations that can no \
            longer be opened are recorded as lost. Refused (exit 78, wrongKeyProvider) while the \
            store records another key provider than the one in use: its key is not lost; refused \
            too while the store has other key slots that may open it (see 'slot list'), unless --force.
            """,
        options: [yes, force])

    /// `--yes` is required by the parser already; checked again because the command destroys data.
    let force: Bool

    init(parsed: ParsedCommand) throws {
        try parsed.requireFlag(Self.yes)
        force = parsed.isSet(Self.force)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        let report = try TokenStore.resetStore(
            path: location.path, appID: location.appID, keyProvider: context.keyProvider(storePath: location.path),
            confirm: .yesDiscardSealedData, despiteOtherKeySlots: force)
        let document: JSONValue = [
            "itemsDestroyed": .int(report.itemsDestroyed),
            "credentialStatesRevoked": .int(report.credentialStatesRevoked),
            "pendingRevocationsLost": .int(report.pendingRevocationsLost),
            "discardedKeyIDs": Format.strings(report.discardedKeyIdentifiers),
            "keptKeyIDs": Format.strings(report.keptKeyIdentifiers),
            "newKeyID": .string(report.newKeyIdentifier),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["items destroyed", String(report.itemsDestroyed)])
            table.append(["users recorded revoked (keyLost)", String(report.credentialStatesRevoked)])
            table.append(["pending revocations lost", String(report.pendingRevocationsLost)])
            if !report.keptKeyIdentifiers.isEmpty {
                table.append(["keys kept (they still open a backup of the file)", String(report.keptKeyIdentifiers.count)])
            }
            table.append(["new key id", report.newKeyIdentifier])
            return table.rendered()
        }
        return .ok
    }
}
