import TokenStore

/// The options every command accepts, before or after the command name.
///
/// `--store PATH` and `--app-id ID` are mutually exclusive; neither given means the
/// store's default location, which the command layer decides.
struct GlobalOptions: Sendable, Equatable {
    /// Where the store lives, as the user named it.
    enum StoreLocation: Sendable, Equatable {
        case defaultLocation
        case path(String)
        case appID(String)
    }

    var storeLocation: StoreLocation = .defaultLocation
    /// `--json`: one JSON document on stdout instead of text columns.
    var json = false
    /// `--quiet`: no progress and no informational lines; errors still go to stderr.
    var quiet = false
    /// `--verbose`: the library's log at debug level and the causes of errors, on stderr.
    var verbose = false
    /// `--passphrase-fd N`: read the store passphrase from this open file descriptor.
    var passphraseFileDescriptor: Int32?
    /// `--recovery-key-fd N`: open the store with its recovery key, read from this descriptor.
    var recoveryKeyFileDescriptor: Int32?
    /// `--pin-fd N`: open the store with its TPM PIN key slot, the PIN read from this descriptor
    /// (for `slot add tpm-pin`: the new slot's PIN).
    var pinFileDescriptor: Int32?
    /// `--key-provider NAME` (or `TOKENCTL_KEY_PROVIDER`): `auto` (the default), or a provider's
    /// command-line name (`secret-service`, `portal`, `tpm`: ``KeyProviderTraits/commandLineName``).
    var keyProvider = KeyProviderName.auto

    /// The key providers `--key-provider` names: `auto` and each kind's command-line name from
    /// ``KeyProviderKind/described``; the passphrase provider is chosen by `--passphrase-fd`.
    struct KeyProviderName: Sendable, Equatable {
        let rawValue: String

        /// The library's choice: the Secret Service, or the Secret portal in a sandbox that cannot reach it.
        static let auto = KeyProviderName(rawValue: "auto")

        /// Every value `--key-provider` accepts, `auto` first.
        static let allNames = [auto.rawValue] + KeyProviderKind.described.compactMap(\.commandLineName)

        /// A value `--key-provider` accepts, else nil.
        init?(_ name: String) {
            guard Self.allNames.contains(name) else { return nil }
            rawValue = name
        }

        private init(rawValue: String) { self.rawValue = rawValue }

        /// The kind it names, described; nil for `auto`.
        var traits: KeyProviderTraits? { KeyProviderKind.described.first { $0.commandLineName == rawValue } }
    }

    static let store = OptionSpec.value(
        "store", "path", "The store database file to open (default: $\(CommandContext.storeVariable)).")
    static let appID = OptionSpec.value(
        "app-id", "id", "Open the default store of this application instead of --store.")
    static let json = OptionSpec.flag("json", "Print one JSON document with stable, sorted keys instead of text.")
    static let quiet = OptionSpec.flag(
        "quiet", "Print no progress and no informational lines; errors are still printed.")
    static let verbose = OptionSpec.flag(
        "verbose",
        "Show the library's log (debug level) and the cause of an error (errno, SQLite or D-Bus text) on stderr; never a secret, an account name or a user id.")
    static let passphraseFileDescriptor = OptionSpec.value(
        "passphrase-fd", "fd", rule: .nonNegativeInteger,
        "Read the store passphrase from this open file descriptor (passphrase key provider).")

    static let recoveryKeyFileDescriptor = OptionSpec.value(
        "recovery-key-fd", "fd", rule: .nonNegativeInteger,
        "Open the store with its recovery key slot, the key read from this open file descriptor (as 'slot add recovery' printed it).")

    static let pinFileDescriptor = OptionSpec.value(
        "pin-fd", "fd", rule: .nonNegativeInteger,
        "Open the store with its TPM PIN key slot, the PIN read from this open file descriptor "
            + "(with 'slot add tpm-pin': the new slot's PIN). The TPM limits wrong PINs.")

    static let keyProvider = OptionSpec.value(
        "key-provider", "name", environment: "TOKENCTL_KEY_PROVIDER",
        rule: .oneOf(KeyProviderName.allNames),
        "Where the data key is kept: auto (Secret Service, or the Secret portal in a Flatpak sandbox), "
            + KeyProviderKind.described.compactMap(\.commandLineSummary).joined(separator: ", ") + ".")

    /// The declarations of the global options, shown under GLOBAL OPTIONS in every command's help.
    static let specs = [
        store, appID, json, quiet, verbose, passphraseFileDescriptor, recoveryKeyFileDescriptor, pinFileDescriptor, keyProvider,
    ]

    /// The global options that may not be combined.
    static let mutuallyExclusive = [[store.name, appID.name], [passphraseFileDescriptor.name, recoveryKeyFileDescriptor.name, pinFileDescriptor.name]]

    /// Reads the global options out of the root command's parsed values.
    init(_ root: ParsedCommand) {
        if let path = root.value(Self.store) {
            storeLocation = .path(path)
        } else if let appID = root.value(Self.appID) {
            storeLocation = .appID(appID)
        }
        json = root.isSet(Self.json)
        quiet = root.isSet(Self.quiet)
        verbose = root.isSet(Self.verbose)
        passphraseFileDescriptor = root.value(Self.passphraseFileDescriptor).flatMap { Int32($0) }
        recoveryKeyFileDescriptor = root.value(Self.recoveryKeyFileDescriptor).flatMap { Int32($0) }
        pinFileDescriptor = root.value(Self.pinFileDescriptor).flatMap { Int32($0) }
        keyProvider = root.value(Self.keyProvider).flatMap(KeyProviderName.init) ?? .auto
    }

    init() {}
}
