import TokenStore

/// `tokenctl discard --entry ID`: gives up on one outbox entry, also one whose row does not
/// open; recorded in the history. The token is not revoked. `tokenctl discard --discovery`:
/// drops the servers' discovery documents kept in the store (public data, fetched again).
struct DiscardCommand: TokenctlCommand {
    static let entry = OptionSpec.value(
        "entry", "id", "The outbox entry's id, as 'tokenctl pending' lists it.")
    static let discovery = OptionSpec.flag(
        "discovery",
        "Instead of an entry: drop the discovery documents kept in the store, also one that does not open "
            + "(verify names the table 'discovery'); each is fetched again from its server when next needed.")

    static let spec = CommandSpec(
        "discard",
        abstract: "Give up on one pending revocation (also an unreadable row); recorded in the history.",
        discussion: """
            Warning: the refresh token is not revoked and may stay valid at the server until it \
            expires. An entry that opens is recorded under its user (revocationDiscarded). A row \
            that does not open has no known user: the entry is recorded under its account's \
            hash, or under the account's user when it was the account's logout. With --discovery, \
            nothing secret is dropped: the servers' public discovery documents the session \
            commands keep sealed in the store are removed (a damaged one stops every session \
            command with integrityCheckFailed until then); tokens stay bound to the endpoints \
            that issued them.
            """,
        options: [entry, discovery])

    /// What to discard.
    enum Target: Equatable {
        case entry(String)
        case discovery
    }

    let target: Target

    init(parsed: ParsedCommand) throws {
        switch (parsed.value(Self.entry), parsed.isSet(Self.discovery)) {
        case (let id?, false): target = .entry(id.lowercased())
        case (nil, true): target = .discovery
        case (.some, true):
            throw UsageError(
                kind: .mutuallyExclusive(options: [Self.entry.longSpelling, Self.discovery.longSpelling]), commandName: parsed.name)
        case (nil, false):
            throw UsageError(kind: .missingOption(option: Self.entry.synopsis), commandName: parsed.name)
        }
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        guard case .entry(let entryID) = target else {
            let dropped = try store.discardServerDocuments()
            context.emit(["discoveryDocuments": .int(dropped)]) {
                "Dropped \(dropped) discovery document(s); each is fetched again from its server when next needed.\n"
            }
            return .ok
        }
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
