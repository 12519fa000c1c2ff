/// A store's protection tier and, below `hardware`, why a higher tier is not in use.
public struct StoreProtection: Sendable, Equatable {
    /// The tier.
    public let tier: ProtectionTier
    /// Why a higher tier is unavailable or not in use (empty for `hardware`); names no user.
    public let reason: String

    /// The tier of a store whose key `kind` holds; `tpm` is what a TPM probe found (asked only
    /// below `hardware`, to say whether the TPM could be used).
    public static func of(_ kind: KeyProviderKind, tpm: @autoclosure () -> TPMAvailability) -> StoreProtection {
        let tier: ProtectionTier
        switch kind {
        case .tpm: return StoreProtection(tier: .hardware, reason: "")
        case .portal: tier = .portal
        case .passphrase: tier = .passphrase
        default: tier = .keyring
        }
        let found = tpm()
        let why = found.available
            ? "a TPM is available (\(TPMDiagnosis.naming(found.tcti))), but this store's key was made by the '"
                + "\(KeyProviderKind.clipped(kind.rawValue))' key provider; a store made with TPMKeyProvider "
                + "(tokenctl --key-provider tpm) is bound to this machine"
            : found.reason
        return StoreProtection(tier: tier, reason: why)
    }
}

extension TokenStore {
    /// This store's protection tier (``ProtectionTier``), from the key provider it was opened
    /// with. Below `hardware` it asks the TPM (``TPMKeyProvider/probe(tcti:)``, a few commands)
    /// to say why a higher tier is not in use: a method, not a property, because it may send TPM
    /// commands (and wait up to the TPM's time-out).
    /// - Throws: ``TokenStoreError`` from the TPM asked (none today: an unusable TPM is the reason).
    public func protection() throws -> StoreProtection { .of(keyProvider.kind, tpm: TPMKeyProvider.probe()) }
}
