import TokenStore

/// `tokenctl discard --entry ID`: gives up on one outbox entry, also one whose row does not
/// open; recorded in the history. The token is not revoked.
struct DiscardCommand: TokenctlCommand {
    static let entry = OptionSpec.value(
        "entry", "id", required: true, "The outbox entry's id, as 'tokenctl pending' lists it.")

    static let spec = CommandSpec(
        "discard",
        abstract: "Give up on one pending revocation (also an unreadable row); recorded in the history.",
        discussion: """
            Warning: the refresh token is not revoked and may stay valid at the server until it \
            expires. An entry that opens is recorded under its user (revocationDiscarded). A row \
            that does not open has no known user: the entry is recorded under its account's \
            hash, or under the account's user when it was the account's logout.
            """,
        options: [entry])

    let entryID: String

    init(parsed: ParsedCommand) throws {
        entryID = try parsed.requiredValue(Self.entry).lowercased()
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        // The erase owed once the last secret is gone runs after the discard.
        let (discarded, unreadable, maintenanceError) = try store.localAccounts.discardPendingRevocation(id: entryID)
        if maintenanceError != nil {
            context.console.writeError("tokenctl: warning: the crypto-erase could not run now; it runs at the next open\n")
        }
        context.emit(["entry": .string(entryID), "discarded": .bool(discarded), "unreadable": .bool(unreadable)]) {
            discarded
                ? "Discarded: the refresh token was not revoked and may stay valid at the server.\n"
                : "Nothing to discard: no such entry.\n"
        }
        return discarded ? .ok : .failure
    }
}
