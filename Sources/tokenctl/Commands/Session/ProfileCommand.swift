import TokenStore

/// `tokenctl profile`: who signed in to an account: the user id, the ID token's `sub`, the
/// name and the email kept from the sign-ins. Reads the store only.
struct ProfileCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "profile",
        abstract: "Show the signed-in user's id, subject, name and email.",
        discussion: """
            Prints what the sign-ins' ID tokens said about the account's user (Apple sends the \
            name and email on the first sign-in only; the store keeps them). Reads the store \
            only; no server is contacted.
            """,
        options: [ItemOptions.account, ItemOptions.service])

    let account: AccountID

    init(parsed: ParsedCommand) throws {
        account = AccountID(
            try parsed.requiredValue(ItemOptions.account),
            service: parsed.value(ItemOptions.service) ?? AccountID.defaultService)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        guard let profile = try store.userProfile(account: account) else {
            throw CommandFailure(
                .failure, "no profile for this account and service",
                hint: "sign in with 'tokenctl login --browser' (or an Apple code); 'tokenctl list' shows the accounts")
        }
        // Identifiers go to stdout because the user asked for them; they are never logged.
        let document: JSONValue = [
            "userID": Format.optional(profile.userID), "subject": .string(profile.subject),
            "name": Format.optional(profile.name), "email": Format.optional(profile.email),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["user id", profile.userID ?? "-"])
            table.append(["subject", profile.subject])
            table.append(["name", profile.name ?? "-"])
            table.append(["email", profile.email ?? "-"])
            return table.rendered()
        }
        return .ok
    }
}
