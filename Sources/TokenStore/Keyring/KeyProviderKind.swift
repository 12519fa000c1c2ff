/// Which kind of key provider holds a store's data key, as the store records it (schema
/// version 10, `store_info.key_provider`, under a MAC): so that opening the store with another
/// provider is `wrongKeyProvider` naming the one it needs, never "key missing", and so that
/// ``KeyProviderSelection/automatic(storePath:probeTimeout:)`` keeps using the provider that made the key.
///
/// The raw value is the provider's ``KeyProvider/name`` (`secret-service`, `portal`,
/// `passphrase`, `tpm`). A provider an app writes itself is
/// recorded under its own name.
public struct KeyProviderKind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The recorded name, e.g. `passphrase`.
    public let rawValue: String

    /// Makes a kind from its recorded name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The Secret Service (``SecretServiceKeyProvider``).
    public static let secretService = KeyProviderKind(rawValue: "secret-service")
    /// The Flatpak Secret portal (``PortalKeyProvider``).
    public static let portal = KeyProviderKind(rawValue: "portal")
    /// A passphrase-wrapped key (``PassphraseKeyProvider``).
    public static let passphrase = KeyProviderKind(rawValue: "passphrase")
    /// A key sealed by this machine's TPM (``TPMKeyProvider``).
    public static let tpm = KeyProviderKind(rawValue: "tpm")
    /// A recovery key slot (``RecoveryKeyProvider``): the key wrapped in the store itself.
    public static let recovery = KeyProviderKind(rawValue: "recovery")
    /// A TPM + PIN key slot (``TPMPINKeyProvider``): the key sealed by the TPM under a PIN, in the store itself.
    public static let tpmPIN = KeyProviderKind(rawValue: "tpm-pin")

    public var description: String { rawValue }

    /// How to open a store of this kind, for the `wrongKeyProvider` hint (API, then tokenctl).
    var openingAdvice: String {
        traits?.openingAdvice ?? "Open it with the key provider named '\(Self.clipped(rawValue))'."
    }

    /// What this kind says about itself (its entry in ``described``); nil for a provider an app
    /// writes itself.
    package var traits: KeyProviderTraits? { Self.traitsByKind[self] }

    private static let traitsByKind = Dictionary(uniqueKeysWithValues: described.map { ($0.kind, $0) })

    /// Each kind this library defines, described, in the order tokenctl lists them: adding a
    /// provider adds its entry here.
    package static let described: [KeyProviderTraits] = [
        KeyProviderTraits(
            kind: .secretService, tier: .keyring, keyHome: "the Secret Service",
            openingAdvice: "This store's key is in the Secret Service: open it with SecretServiceKeyProvider "
                + "(tokenctl: --key-provider secret-service), with a Secret Service running.",
            commandLineName: "secret-service",
            tokenctlAdvice: "this store's key is in the Secret Service: open it with --key-provider secret-service (or without "
                + "--key-provider), with a Secret Service running",
            make: { _ in SecretServiceKeyProvider() }),
        KeyProviderTraits(
            kind: .portal, tier: .portal, keyHome: "a key file beside the store (wrapped under the Secret portal's secret for this app)",
            openingAdvice: "This store's key is wrapped under the Secret portal: open it with PortalKeyProvider "
                + "(tokenctl: --key-provider portal), inside the app's sandbox.",
            commandLineName: "portal",
            tokenctlAdvice: "this store's key is wrapped under the Secret portal: open it with --key-provider portal, inside the "
                + "app's sandbox",
            identity: .portalProvider, make: { PortalKeyProvider(storePath: $0) }),
        KeyProviderTraits(
            kind: .passphrase, tier: .passphrase, capabilities: .asksForPassphrase, keyHome: "a passphrase-wrapped key file",
            openingAdvice: "This store's key is passphrase-wrapped: open it with a PassphraseKeyProvider and its passphrase "
                + "(tokenctl: --passphrase-fd N).",
            commandLineName: nil, tokenctlOption: "--passphrase-fd N (the passphrase on descriptor N)",
            tokenctlAdvice: "this store's key is passphrase-wrapped: open it with --passphrase-fd N (the passphrase on descriptor N)",
            identity: .passphraseProvider, make: nil),
        KeyProviderTraits(
            kind: .tpm, tier: .hardware, capabilities: .sealsWithTPM, keyHome: "the Secret Service, sealed by the TPM",
            openingAdvice: "This store's key is sealed by a TPM: open it with TPMKeyProvider "
                + "(tokenctl: --key-provider tpm), on the machine whose TPM sealed it.",
            commandLineName: "tpm",
            commandLineSummary: "tpm (sealed by this machine's TPM, $TOKENSTORE_TPM_TCTI; give it on every command for a TPM store)",
            tokenctlAdvice: "this store's key is sealed by a TPM: open it with --key-provider tpm (or TOKENCTL_KEY_PROVIDER=tpm) "
                + "on the machine whose TPM sealed it",
            make: { _ in TPMKeyProvider() }),
        KeyProviderTraits(
            kind: .tpmPIN, tier: .hardware, capabilities: [.sealsWithTPM, .asksForPassphrase],
            keyHome: "the store's key slot, sealed by the TPM under a PIN",
            openingAdvice: "This store's key is sealed by a TPM under a PIN: open it with a TPMPINKeyProvider and its PIN "
                + "(tokenctl: --pin-fd N), on the machine whose TPM sealed it.",
            commandLineName: nil, tokenctlOption: "--pin-fd N (the PIN on descriptor N)",
            tokenctlAdvice: "this store's key is sealed by a TPM under a PIN: open it with --pin-fd N (the PIN on descriptor N) "
                + "on the machine whose TPM sealed it",
            make: nil),
    ]

    /// A recorded name as it may appear in a message: printable ASCII, at most 32 characters.
    static func clipped(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f && $0 != "'" }
        return String(String.UnicodeScalarView(printable.prefix(32)))
    }
}

extension KeyProvider {
    /// The kind recorded for stores whose key this provider makes: its ``name``.
    public var kind: KeyProviderKind { KeyProviderKind(rawValue: name) }
}
