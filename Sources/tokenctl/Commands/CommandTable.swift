import TokenStore

/// Every tokenctl command with its options and help texts: the single source for parsing,
/// help screens and usage errors.
///
/// Names and meanings are a public interface: tests outside the repository call them.
enum CommandTable {
    /// Printed by `tokenctl --version`.
    static let version = "0.1.0"

    /// The values `--kind` accepts, as typed on the command line.
    static let itemKinds = ItemKind.allCases.map(\.rawValue)

    /// The environment variables that supply `--domain` and `--client-id`.
    static let domainVariable = "TOKENCTL_DOMAIN"
    static let clientIDVariable = "TOKENCTL_CLIENT_ID"

    /// tokenctl itself: the global options and the commands.
    static let root = CommandSpec(
        "tokenctl",
        abstract: "Inspect, verify and drive a TokenStore without ever seeing a secret by accident.",
        discussion: """
            Secrets are never printed unless a command is given --reveal, and are read from \
            stdin, never from an argument. Exit statuses follow sysexits: 0 ok, 64 usage error, \
            65 data error, 69 unavailable, 75 temporary failure, 77 permission, 1 anything else.
            """,
        options: GlobalOptions.specs,
        mutuallyExclusive: GlobalOptions.mutuallyExclusive,
        subcommands: [
            status, list, get, put, delete, state, history, login, token, logout, resume, pending,
            verify, migrate, rotateKey, unlock, reset, destroy,
        ])

    // MARK: Inspecting the store

    static let status = CommandSpec(
        "status",
        abstract: "Show the store path, schema version, key provider and key state, and counts.",
        discussion: """
            Prints the store path, the schema version, the key provider and the state of the \
            data key (present, locked or missing), the item and account counts, the pending \
            revocations and the file modes. When the data key is missing or locked, says in \
            plain words what happened and the way forward.
            """)

    static let list = CommandSpec(
        "list",
        abstract: "List the items: account, kind, created, updated, fingerprint; never the secret.")

    static let get = CommandSpec(
        "get",
        abstract: "Show one item's metadata and fingerprint; the secret only with --reveal.",
        options: [account, kind, service, reveal("Also print the secret. Warns on stderr when stdout is a terminal.")])

    static let put = CommandSpec(
        "put",
        abstract: "Store a secret read from stdin.",
        discussion: """
            The secret is read from stdin, never from an argument, so that it stays out of the \
            shell history and the process list. A trailing newline is removed.

              printf '%s' "$TOKEN" | tokenctl put --account alice --kind generic
            """,
        options: [
            account, kind, service, .value("label", "label", "A label for people; not secret, not unique."),
        ])

    static let delete = CommandSpec(
        "delete",
        abstract: "Delete one item. Succeeds when the item is already gone.",
        options: [account, kind, service])

    static let state = CommandSpec(
        "state",
        abstract: "Show a user's credential state: authorized, revoked or notFound.",
        discussion: "Exits 0 for each of the three states.",
        positionals: [userID])

    static let history = CommandSpec(
        "history",
        abstract: "Show a user's credential state transitions, with time and reason.",
        positionals: [userID])

    // MARK: Driving the session and the logout

    static let login = CommandSpec(
        "login",
        abstract: "Exchange an Apple authorization code; store the refresh token and user id.",
        options: [
            domain, clientID, account,
            .value("apple-code", "code", required: true, "The authorization code from Sign in with Apple."),
            .value("apple-user-id", "user-id", required: true, "The user identifier from Sign in with Apple."),
            scope,
        ])

    static let token = CommandSpec(
        "token",
        abstract: "Get an access token silently; print its expiry and scopes.",
        discussion: "The access token itself is printed only with --reveal.",
        options: [
            domain, clientID, account, scope,
            reveal("Also print the access token. Warns on stderr when stdout is a terminal."),
        ])

    static let logout = CommandSpec(
        "logout",
        abstract: "Revoke the refresh token, delete the account's items and record the logout.",
        discussion: """
            When the revocation cannot reach the server, the account is still signed out and \
            the revocation is kept in the outbox for 'tokenctl resume'; the exit status is then 75.
            """,
        options: [domain, clientID, account])

    static let resume = CommandSpec(
        "resume",
        abstract: "Retry the pending revocations and print what happened.",
        options: [domain, clientID])

    static let pending = CommandSpec(
        "pending",
        abstract: "List the outbox: account, attempts, next attempt, last error.")

    // MARK: Maintenance

    static let verify = CommandSpec(
        "verify",
        abstract: "Check the database's integrity and open every sealed row.",
        discussion: """
            Runs PRAGMA integrity_check, then opens every sealed row and reports each bad row \
            by id and reason. Exits 65 when anything is wrong.
            """)

    static let migrate = CommandSpec(
        "migrate",
        abstract: "Apply the pending schema migrations.",
        options: [.flag("dry-run", "List the pending migrations without applying them.")])

    static let rotateKey = CommandSpec(
        "rotate-key",
        abstract: "Make a new data key, re-seal every item under it, then delete the old key.",
        discussion: """
            Resumable: if interrupted, the next open of the store finishes or rolls back the \
            rotation, and every item stays readable.
            """)

    static let unlock = CommandSpec(
        "unlock",
        abstract: "Ask the Secret Service to unlock the keyring, showing the desktop's prompt.",
        discussion: "A dismissed prompt leaves the keyring locked and exits 75.")

    static let reset = CommandSpec(
        "reset",
        abstract: "Destroy the sealed items after the data key was lost; keep the history.",
        discussion: """
            Warning: every stored secret is deleted. The credential-state history is kept, \
            with each user marked revoked (reason keyLost); pending revocations that can no \
            longer be opened are recorded as lost.
            """,
        options: [.flag("yes", required: true, "Confirm that the sealed items are to be destroyed.")])

    static let destroy = CommandSpec(
        "destroy",
        abstract: "Delete the store's database and its key items.",
        discussion: "Warning: everything in the store is lost, including the history.",
        options: [.flag("yes", required: true, "Confirm that the store is to be destroyed.")])

    // MARK: Shared options

    private static let account = OptionSpec.value(
        "account", "account", required: true, "The account the item belongs to.")
    private static let kind = OptionSpec.value(
        "kind", "kind", required: true, rule: .oneOf(itemKinds), "The kind of item.")
    private static let service = OptionSpec.value(
        "service", "service", "The service the item belongs to, when the store holds several.")
    private static let domain = OptionSpec.value(
        "domain", "url", required: true, environment: domainVariable, rule: .httpURL,
        "The authorization server's base URL.")
    private static let clientID = OptionSpec.value(
        "client-id", "id", required: true, environment: clientIDVariable, "The OAuth client identifier.")
    private static let scope = OptionSpec.value(
        "scope", "scope", repeatable: true, "A scope to request; repeat for several.")
    private static let userID = PositionalSpec("user-id", "The Apple user identifier.")

    private static func reveal(_ abstract: String) -> OptionSpec { .flag("reveal", abstract) }
}
