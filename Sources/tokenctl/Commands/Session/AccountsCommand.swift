import TokenStore

/// `tokenctl accounts`: the accounts the store holds session entries for, with the user id,
/// its credential state and the audiences of the cached access tokens. Reads the store only.
///
/// Built from the store, as ``TokenSession/accounts()`` builds its list, so that it needs no
/// `--domain` or `--client-id`: no server is contacted.
struct AccountsCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "accounts",
        abstract: "List the accounts: service, user id, state, cached audiences.",
        discussion: """
            One line per account with stored entries: the Apple user id, whether the account \
            can renew (holds a refresh token), whether a logout of it is under way (begun, \
            its local part not finished: an interrupted or offline logout; 'tokenctl logout' \
            or 'resume' finishes it, and so does any command that writes to the store two \
            minutes after it began), the user's credential state, and the APIs (audiences) \
            the account has access tokens cached for, '(default)' being the tenant's default \
            API. Reads the store only; no server is contacted and no token is shown.
            """)

    /// One account as printed.
    struct Row {
        let account: AccountID
        let userID: String?
        let state: CredentialState
        /// Whether the account holds a refresh token (and is not logging out).
        let canRenew: Bool
        /// Whether a logout of the account has begun and its local part is not finished.
        let loggingOut: Bool
        /// Distinct, the default audience (`nil`) first, then sorted.
        let audiences: [String?]
    }

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        let rows = try store.accounts().map { info in
            let userID = try store.appleUserID(account: info.account)
            let cached = Set(try store.ledger.cachedAccessTokens(account: info.account).map(\.key.audience))
            return Row(
                account: info.account, userID: userID,
                state: try userID.map { try store.credentialState(forUserID: $0) } ?? .notFound,
                canRenew: try store.ledger.hasRefreshToken(account: info.account), loggingOut: info.isLoggingOut,
                audiences: (cached.contains(nil) ? [nil] : []) + cached.compactMap { $0 }.sorted())
        }
        // Identifiers go to stdout because the user asked for them; they are never logged.
        let document: JSONValue = [
            "accounts": .array(rows.map { row in
                [
                    "account": .string(row.account.name), "service": .string(row.account.service),
                    "userID": Format.optional(row.userID), "state": .string(row.state.rawValue),
                    "canRenew": .bool(row.canRenew), "loggingOut": .bool(row.loggingOut),
                    "audiences": .array(row.audiences.map(Format.optional)),
                ]
            })
        ]
        context.emit(document) {
            guard !rows.isEmpty else { return "No accounts.\n" }
            var table = TextTable(header: ["SERVICE", "ACCOUNT", "USER ID", "CAN RENEW", "LOGGING OUT", "STATE", "AUDIENCES"])
            for row in rows {
                table.append([
                    Format.service(row.account.service), row.account.name, row.userID ?? "-", row.canRenew ? "yes" : "no",
                    row.loggingOut ? "yes" : "no", row.state.rawValue,
                    row.audiences.isEmpty ? "-" : row.audiences.map { $0 ?? "(default)" }.joined(separator: " "),
                ])
            }
            return table.rendered()
        }
        return .ok
    }
}
