/// How well a store's data key is protected, from best to least: what a copy of the user's
/// files can and cannot do (README, "Protection tiers").
public enum ProtectionTier: String, Sendable, CaseIterable {
    /// Sealed by this machine's TPM and kept in the keyring (``TPMKeyProvider``): a copy of the
    /// files, keyring included, does not open on another machine.
    case hardware
    /// In the Secret Service (``SecretServiceKeyProvider``): whoever has the keyring (and its
    /// password, or an unlocked session) opens the store, on any machine.
    case keyring
    /// Wrapped under the Secret portal's per-app secret (``PortalKeyProvider``), kept in the keyring.
    case portal
    /// Wrapped under a passphrase (``PassphraseKeyProvider``): as strong as the passphrase.
    case passphrase
}
