/// Whether a TPM can be used, as ``TPMKeyProvider/probe(tcti:)`` found.
public struct TPMAvailability: Sendable, Equatable {
    /// The TCTI asked.
    public let tcti: String
    /// Whether the TPM answered and made the primary key.
    public let available: Bool
    /// Why not (names the TPM and the reason); empty when available.
    public let reason: String
}
