/// What a kind of key provider says about itself: its tier, where its key lives, how to open a
/// store of its kind, its tokenctl name and what it can do. One entry per kind, in
/// ``KeyProviderKind``'s table (`KeyProviderKind.described`); `StoreProtection`, the open's
/// `wrongKeyProvider` hint, tokenctl (`status`, `--key-provider`, its error hints) read it
/// instead of switching on names.
package struct KeyProviderTraits: Sendable {
    /// What a kind of provider can do beyond keeping a key.
    package struct Capabilities: OptionSet, Sendable {
        package let rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }

        /// Its key is sealed by a TPM (the provider's ``KeyProvider/tpmTCTI`` names it): the tier
        /// is the TPM's, asked of that TPM (`hardware`, or `softwareTPM`).
        package static let sealsWithTPM = Capabilities(rawValue: 1 << 0)
        /// It is opened with a passphrase the user gives (tokenctl: `--passphrase-fd`), not by name.
        package static let asksForPassphrase = Capabilities(rawValue: 1 << 1)
    }

    /// The kind described.
    package let kind: KeyProviderKind
    /// The tier of a store whose key this kind holds (for a kind that ``Capabilities/sealsWithTPM``,
    /// the tier of a hardware TPM; a software one is `softwareTPM`).
    package let tier: ProtectionTier
    package let capabilities: Capabilities
    /// Where the key lives, in words: "The data key is in …" (`tokenctl status`).
    package let keyHome: String
    /// How to open a store of this kind, for the `wrongKeyProvider` hint (API, then tokenctl).
    package let openingAdvice: String
    /// The `--key-provider` value (`TOKENCTL_KEY_PROVIDER`) that chooses it; nil when an option
    /// of its own chooses it (`--passphrase-fd`).
    package let commandLineName: String?
    /// The option as `tokenctl --help` describes it, e.g. `portal`; nil without a ``commandLineName``.
    package let commandLineSummary: String?
    /// The tokenctl option(s) that open a store of this kind, as `status` names them.
    package let tokenctlOption: String
    /// How to open a store of this kind with tokenctl, for its `wrongKeyProvider` hint.
    package let tokenctlAdvice: String
    /// The program behind it when that is the provider itself (no daemon to ask); nil: the owner
    /// of `org.freedesktop.secrets`.
    package let identity: KeyProviderIdentity?
    /// Makes the provider for the store at a path (tokenctl's `--key-provider`); nil when it needs
    /// more than the path (a passphrase).
    package let make: (@Sendable (_ storePath: String) -> any KeyProvider)?

    package init(
        kind: KeyProviderKind, tier: ProtectionTier, capabilities: Capabilities = [], keyHome: String, openingAdvice: String,
        commandLineName: String?, commandLineSummary: String? = nil, tokenctlOption: String? = nil,
        tokenctlAdvice: String, identity: KeyProviderIdentity? = nil,
        make: (@Sendable (_ storePath: String) -> any KeyProvider)?
    ) {
        self.kind = kind
        self.tier = tier
        self.capabilities = capabilities
        self.keyHome = keyHome
        self.openingAdvice = openingAdvice
        self.commandLineName = commandLineName
        self.commandLineSummary = commandLineSummary ?? commandLineName
        self.tokenctlOption = tokenctlOption ?? commandLineName.map { "--key-provider \($0)" } ?? ""
        self.tokenctlAdvice = tokenctlAdvice
        self.identity = identity
        self.make = make
    }
}
