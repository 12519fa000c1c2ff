/// Whether a TPM can be used, as ``TPMKeyProvider/probe(tcti:)`` found.
public struct TPMAvailability: Sendable, Equatable {
    /// The TCTI asked.
    public let tcti: String
    /// Whether the TPM answered and made the primary key.
    public let available: Bool
    /// Why not (names the TPM and the reason); empty when available.
    public let reason: String
    /// Whether the TPM is a software TPM (a simulator: swtpm, mssim, any TCTI but the kernel's
    /// TPM device, or a device whose manufacturer is a simulator's, as a virtual machine's TPM
    /// made by swtpm): a key it seals is the `softwareTPM` tier, not `hardware`. Decided by the
    /// TCTI alone when the TPM did not answer.
    public let simulator: Bool

    /// No usable TPM at `tcti`, for `reason` (whether it is a software TPM decided by the TCTI alone).
    package static func unavailable(tcti: String, reason: String) -> TPMAvailability {
        TPMAvailability(tcti: tcti, available: false, reason: reason, simulator: !TPMIdentity.isKernelDevice(tcti))
    }

    init(tcti: String, available: Bool, reason: String, simulator: Bool = false) {
        self.tcti = tcti
        self.available = available
        self.reason = reason
        self.simulator = simulator
    }
}
