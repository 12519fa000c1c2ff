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

    /// At most this many keys are remembered (one per store a process signs for, usually one);
    /// beyond it, the one unused the longest is forgotten (its next proof loads it from its blob).
    static let limit = 8

    private struct Entry {
        var context: [UInt8]
        /// When it was last kept or used, in ``clock`` ticks.
        var used: UInt64
    }

    private let entries = Locked((byKey: [Slot: Entry](), clock: UInt64(0)))

    /// The saved context of `slot`'s key, if this process kept one (now its most recently used).
    func context(for slot: Slot) -> [UInt8]? {
        entries.withLock { state in
            guard var entry = state.byKey[slot] else { return nil }
            state.clock += 1
            entry.used = state.clock
            state.byKey[slot] = entry
            return entry.context
        }
    }

    /// Keeps `context` for `slot`; when ``limit`` keys are kept already, the one unused the
    /// longest is forgotten. (All of them used to be: a process signing with more keys than the
    /// limit, as the test suite's parallel TPM tests do, then lost the context of the key in use.)
    func keep(_ context: [UInt8], for slot: Slot) {
        entries.withLock { state in
            if state.byKey[slot] == nil, state.byKey.count >= Self.limit,
                let oldest = state.byKey.min(by: { $0.value.used < $1.value.used })?.key
            {
                state.byKey[oldest] = nil
            }
            state.clock += 1
            state.byKey[slot] = Entry(context: context, used: state.clock)
        }
    }

    /// Forgets `slot`'s context (the TPM refused it).
    func forget(_ slot: Slot) { _ = entries.withLock { $0.byKey.removeValue(forKey: slot) } }
}
