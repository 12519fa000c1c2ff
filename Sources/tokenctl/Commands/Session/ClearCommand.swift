import TokenStore

/// `tokenctl clear --yes`: removes an account's local session entries without revoking
/// anything at the server (Auth0.swift's `CredentialsManager.clear()`), as
/// ``TokenSession/clearLocally(account:)`` does. Needs no server.
struct ClearCommand: TokenctlCommand {
    static let yes = OptionSpec.flag(
        "yes", required: true, "Confirm that the entries are to be removed without revoking the refresh token.")

    static let warning =
        "tokenctl: warning: the refresh token was not revoked: it stays valid at the server until it expires "
        + "('tokenctl logout' revokes)\n"

    static let spec = CommandSpec(
        "clear",
        abstract: "Remove an account's local entries without revoking at the server.",
        discussion: """
            Warning: the refresh token is deleted here but not revoked: it stays valid at the \
            server until it expires. Prefer 'tokenctl logout'. Removes the refresh token, the \
            user id, the cached access tokens, the ID token and the profile; the user is \
            recorded revoked with reason clearedLocally (detail notRevokedAtServer). \
            Revocations already in the outbox stay there. No server is contacted.
            """,
        options: [ItemOptions.account, ItemOptions.service, yes])

    let account: AccountID

    /// `--yes` is required by the parser already; checked again because the command deletes data.
    init(parsed: ParsedCommand) throws {
        try parsed.requireFlag(Self.yes)
        account = AccountID(
            try parsed.requiredValue(ItemOptions.account),
            service: parsed.value(ItemOptions.service) ?? AccountID.defaultService)
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        // The crypto-erase owed once the last account is gone runs now, as the session does,
        // rather than at the next open. The entries are removed whatever happens there.
        let (cleared, maintenanceError) = try store.localAccounts.clear(account: account)
        if cleared { context.console.writeError(Self.warning) }
        if let error = maintenanceError as? TokenStoreError {
            context.note("the owed key maintenance did not run now (\(error.code.rawValue)); the next open runs it")
        } else if let maintenanceError {
            throw maintenanceError
        }
        let document: JSONValue = [
            "cleared": .bool(cleared), "service": .string(account.service), "account": .string(account.name),
        ]
        context.emit(document) {
            cleared
                ? "Cleared the account's local entries; the refresh token was not revoked.\n"
                : "Nothing to clear: no entries for this account.\n"
        }
        return .ok
    }
}
