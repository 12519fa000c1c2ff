import TokenStore

/// tokenctl's commands and global options: the single source for parsing, help screens and
/// usage errors. Each command declares itself in its own type (see `TokenctlCommand`).
///
/// Names and meanings are a public interface: tests outside the repository call them.
enum CommandTable {
    /// Printed by `tokenctl --version`.
    static let version = TokenStoreVersion.string

    /// The values `--kind` accepts, as typed on the command line.
    static let itemKinds = ItemKind.allCases.map(\.rawValue)

    /// The environment variables that supply `--domain` and `--client-id`.
    static let domainVariable = "TOKENCTL_DOMAIN"
    static let clientIDVariable = "TOKENCTL_CLIENT_ID"
    /// The environment variable that supplies `--issuer`.
    static let issuerVariable = "TOKENCTL_ISSUER"

    /// Every command, in the order the help's SUBCOMMANDS section lists them.
    static let commands: [any TokenctlCommand.Type] = [
        // Inspecting the store
        StatusCommand.self, ListCommand.self, GetCommand.self, PutCommand.self, DeleteCommand.self,
        StateCommand.self, HistoryCommand.self,
        // Driving the session and the logout
        LoginCommand.self, ProfileCommand.self, AccountsCommand.self, TokenCommand.self, ProofCommand.self, LogoutCommand.self,
        ClearCommand.self, ResumeCommand.self, PendingCommand.self, DiscardCommand.self,
        // Maintenance
        VerifyCommand.self, MigrateCommand.self, RotateKeyCommand.self, SlotCommand.self, MigrateProviderCommand.self,
        PolicyCommand.self, PolkitActionCommand.self, LockCommand.self, UnlockCommand.self, ResetCommand.self,
        DestroyCommand.self,
    ]

    /// tokenctl itself: the global options and the commands.
    static let root = CommandSpec(
        "tokenctl",
        abstract: "Inspect, verify and drive a TokenStore without ever seeing a secret by accident.",
        discussion: """
            Secrets are never printed unless a command is given --reveal, and are read from \
            stdin, never from an argument. Exit statuses follow sysexits: 0 ok, 64 usage error, \
            65 data error, 66 no store at the path, 69 unavailable, 75 temporary failure, 77 permission, 78 \
            configuration (the server cannot give what was asked, or the store needs another \
            key provider), 1 anything else.
            """,
        options: GlobalOptions.specs,
        mutuallyExclusive: GlobalOptions.mutuallyExclusive,
        subcommands: commands.map { $0.spec })

    /// The command type called `name`, or `nil` when there is none.
    static func command(named name: String) -> (any TokenctlCommand.Type)? {
        commands.first { $0.spec.name == name }
    }
}
