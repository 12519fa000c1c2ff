/// A store's protection tier and, below `hardware`, why a higher tier is not in use.
public struct StoreProtection: Sendable, Equatable {
    /// The tier.
    public let tier: ProtectionTier
    /// Why a higher tier is unavailable or not in use (empty for `hardware`); names no user.
    public let reason: String

    /// The tier of a store whose key `kind` holds; `tpm` is what a TPM probe found: for a TPM
    /// store whether that TPM is a software one (`softwareTPM`, else `hardware`), below that
    /// whether the TPM could be used.
    public static func of(_ kind: KeyProviderKind, tpm: @autoclosure () -> TPMAvailability) -> StoreProtection {
        // A kind this library does not describe (an app's own provider) keeps its key in the keyring.
        let tier = kind.traits?.tier ?? .keyring
        if kind.traits?.capabilities.contains(.sealsWithTPM) == true {
            let found = tpm()
            guard found.simulator else { return StoreProtection(tier: tier, reason: "") }
            return StoreProtection(
                tier: .softwareTPM,
                reason: "\(TPMDiagnosis.naming(found.tcti)) is a software TPM (a simulator such as swtpm, or a virtual "
                    + "machine's TPM), not this machine's TPM chip or firmware: the seal binds the key to that TPM's "
                    + "state, which is files that can be copied, not to this machine's hardware")
        }
        let found = tpm()
        let why = found.available
            ? "a TPM is available (\(TPMDiagnosis.naming(found.tcti))\(found.simulator ? ", a software TPM" : "")), "
                + "but this store's key was made by the '"
                + "\(KeyProviderKind.clipped(kind.rawValue))' key provider; a store made with TPMKeyProvider "
                + "(tokenctl --key-provider tpm) is bound to this machine"
            : found.reason
        return StoreProtection(tier: tier, reason: why)
    }
}

extension TokenStore {
    /// This store's protection tier (``ProtectionTier``), from the key provider it was opened
    /// with: a method, not a property, because it may send TPM commands (and wait up to the
    /// TPM's time-out). A TPM store is `hardware`, or `softwareTPM` when its TPM is a software
    /// one (decided by the TCTI; a device TCTI is asked its manufacturer once per process).
    /// Below that it asks the TPM (``TPMKeyProvider/probe(tcti:)``, a few commands) to say why
    /// a higher tier is not in use.
    /// - Throws: ``TokenStoreError`` `tpmUnavailable` when a TPM store's device must be asked
    ///   its manufacturer and does not answer.
    public func protection() throws -> StoreProtection {
        let kind = keyProvider.kind
        if kind.traits?.capabilities.contains(.sealsWithTPM) == true, let tcti = keyProvider.tpmTCTI {
            let simulator = try TPMIdentity.isSimulator(tcti: tcti)
            return .of(kind, tpm: TPMAvailability(tcti: tcti, available: true, reason: "", simulator: simulator))
        }
        return .of(kind, tpm: TPMKeyProvider.probe())
    }
}
