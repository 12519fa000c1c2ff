/// The saved contexts (TPM2_ContextSave) of the TPM-resident DPoP keys this process has signed
/// with, per TPM and key blob: a later proof loads the context again (TPM2_ContextLoad, one
/// command) instead of deriving the primary key and loading the key under it (three commands,
/// one of them an ECC key derivation: the slowest command on a real TPM).
///
/// A saved context is encrypted and integrity-protected by the TPM with a key that never leaves
/// it and changes when it restarts: only this TPM loads it, only until then (a refused context is
/// forgotten and the key loaded from its blob again). Kept in memory only, a few entries at most.
final class SavedContexts: Sendable {
    /// A key on a TPM: the TCTI and the key's blob (`TPMSealedBlob`, encoded).
    struct Slot: Hashable, Sendable {
        let tcti: String
        let blob: [UInt8]
    }

    /// The process's contexts.
    static let shared = SavedContexts()

    /// At most this many keys are remembered (one per store a process signs for, usually one).
    static let limit = 8

    private let entries = Locked([Slot: [UInt8]]())

    /// The saved context of `slot`'s key, if this process kept one.
    func context(for slot: Slot) -> [UInt8]? { entries.withLock { $0[slot] } }

    /// Keeps `context` for `slot` (all are forgotten when more than ``limit`` keys would be kept).
    func keep(_ context: [UInt8], for slot: Slot) {
        entries.withLock { entries in
            if entries[slot] == nil, entries.count >= Self.limit { entries.removeAll() }
            entries[slot] = context
        }
    }

    /// Forgets `slot`'s context (the TPM refused it).
    func forget(_ slot: Slot) { _ = entries.withLock { $0.removeValue(forKey: slot) } }
}
