/// How well a store's data key is protected, from best to least: what a copy of the user's
/// files can and cannot do (README, "Protection tiers").
///
/// Not an enum: a later version may add tiers, so a `switch` over tiers needs a `default:` (as
/// over ``TokenStoreError/Code``). The raw values never change (`tokenctl --json status` prints them).
///
/// ```swift
/// switch try store.protection().tier {
/// case .hardware: print("bound to this machine's TPM")
/// default: print("not bound to this machine")
/// }
/// ```
public struct ProtectionTier: RawRepresentable, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The raw value, e.g. `"hardware"`.
    public let rawValue: String

    /// Makes a tier from its raw value.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Sealed by this machine's TPM and kept in the keyring (``TPMKeyProvider``): a copy of the
    /// files, keyring included, does not open on another machine.
    public static let hardware = ProtectionTier(rawValue: "hardware")
    /// Sealed by a software TPM (``TPMKeyProvider`` over swtpm, mssim, any TCTI but the kernel's
    /// TPM device, or a device whose manufacturer is a simulator's) and kept in the keyring: the
    /// TPM's state is files, so a copy of them and of the keyring opens the store elsewhere.
    public static let softwareTPM = ProtectionTier(rawValue: "softwareTPM")
    /// In the Secret Service (``SecretServiceKeyProvider``): whoever has the keyring (and its
    /// password, or an unlocked session) opens the store, on any machine.
    public static let keyring = ProtectionTier(rawValue: "keyring")
    /// Wrapped under the Secret portal's per-app secret (``PortalKeyProvider``), kept in the keyring.
    public static let portal = ProtectionTier(rawValue: "portal")
    /// Wrapped under a passphrase (``PassphraseKeyProvider``): as strong as the passphrase.
    public static let passphrase = ProtectionTier(rawValue: "passphrase")

    /// Every tier this version defines, best first. A later version may add more.
    public static let allCases: [ProtectionTier] = [.hardware, .softwareTPM, .keyring, .portal, .passphrase]

    /// The tiers in the C ABI's order: a tier's `ts_protection` value (include/tokenstore.h) is
    /// its index here. A new tier is appended, never inserted: the C values never change.
    package static let abiOrder: [ProtectionTier] = [.hardware, .keyring, .portal, .passphrase, .softwareTPM]

    public var description: String { rawValue }
}
