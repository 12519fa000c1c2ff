import FoundationEssentials

/// How an open finds the data key through the store's key slots (``KeySlots``), before the key
/// is loaded (the rows are read unchecked here; the open checks them once the key is loaded).
///
/// - A store with no slot row: the provider's key filed under the data key's own id (as before
///   slots existed).
/// - A provider of a kind with slot rows: each of its rows in turn, the key filed under the
///   row's `key_ref` (a recovery key: unwrapped from the row's blob); for a boxed row that is
///   the secret half of the slot's key pair, which opens the data key from the row's box. The
///   first that holds the key wins. None holds it: nil (the caller's `dataKeyMissing`).
struct KeySlotOpening {
    let database: Database
    let provider: any KeyProvider
    let appID: String

    /// The data key's material and, when read with it, the provider's epoch.
    func loadKey(storeID: [UInt8], keyID: [UInt8]) throws -> (key: SecretBytes?, epoch: UInt64?) {
        let rows = try KeySlots.unchecked(database, kind: provider.kind)
        if rows.isEmpty {
            if let inStore = provider as? any InStoreKeySlotProvider {
                throw TokenStoreError(
                    .dataKeyMissing, "This store has no \(inStore.slotNoun.dropFirst(2)).", hint: Self.otherSlotsHint(database, except: inStore.kind))
            }
            return try provider.loadKeyAndStoreEpoch(reference(storeID: storeID, keyRef: keyID))
        }
        var firstError: Error?
        for row in rows {
            let reference = reference(storeID: storeID, keyRef: row.keyRef)
            do {
                if let inStore = provider as? any InStoreKeySlotProvider {
                    guard let sealed = row.sealed else { continue }
                    return (try Self.dataKey(try inStore.unwrap(sealed, reference: reference), row: row), 0)
                }
                let loaded = try provider.loadKeyAndStoreEpoch(reference)
                if let material = loaded.key { return (try Self.dataKey(material, row: row), loaded.epoch) }
            } catch let error as TokenStoreError where error.code == .tpmLockedOut {
                throw error  // every PIN slot of this TPM is refused alike
            } catch {
                firstError = firstError ?? error
            }
        }
        if let firstError { throw firstError }
        return (nil, nil)
    }

    /// What a slot's provider gave: the data key itself, or for a boxed slot (schema version 17)
    /// the secret half of its key pair, which opens the data key from the box.
    static func dataKey(_ material: SecretBytes, row: KeySlots.Row) throws -> SecretBytes {
        guard let box = row.box else { return material }
        return try SlotBox.open(box.boxedKey, publicKey: box.publicKey, secretKey: material)
    }

    func reference(storeID: [UInt8], keyRef: [UInt8]) -> DataKeyReference {
        DataKeyReference(storeID: Hex.encode(storeID), keyID: Hex.encode(keyRef), appID: appID)
    }

    /// The kinds of the store's other slots and how to open with them, for a `dataKeyMissing`
    /// hint; nil when the store records no other slot.
    static func otherSlotsHint(_ database: Database, except kind: KeyProviderKind) -> String? {
        let others = ((try? KeySlots.unchecked(database)) ?? []).map(\.kind).filter { $0 != kind }
        guard !others.isEmpty else { return nil }
        var seen: [KeyProviderKind] = []
        for other in others where !seen.contains(other) { seen.append(other) }
        let ways = seen.map { "\(KeyProviderKind.clipped($0.rawValue)) (\(openingOption($0)))" }
        return "This store has other key slots: " + ways.joined(separator: ", ")
            + ". Open it with one of them, then add a new slot for this provider; do not reset the store: its data is intact."
    }

    /// Before a reset: refuses a store with a key slot of another kind than `provider`'s, which
    /// may still open it (`wrongKeyProvider`, nothing changed).
    static func refuseReset(_ database: Database, provider: any KeyProvider) throws {
        guard let hint = otherSlotsHint(database, except: provider.kind) else { return }
        throw TokenStoreError(
            .wrongKeyProvider,
            "This store has other key slots that may still open it; it was not reset. Nothing was changed.",
            hint: hint + " To reset it all the same: tokenctl reset --yes --force (API: despiteOtherKeySlots: true).")
    }

    /// How tokenctl opens a store with a slot of `kind`.
    static func openingOption(_ kind: KeyProviderKind) -> String {
        if kind == .recovery { return "tokenctl --recovery-key-fd N; API: RecoveryKeyProvider" }
        if kind == .tpmPIN { return "tokenctl --pin-fd N; API: TPMPINKeyProvider" }
        if let traits = kind.traits { return traits.tokenctlOption.isEmpty ? traits.openingAdvice : "tokenctl \(traits.tokenctlOption)" }
        return "its own provider"
    }

    /// The kinds an open without a named provider may try after the automatic choice, in slot
    /// order: those that need nobody to type anything (no passphrase, no recovery key).
    static func unattendedKinds(_ database: Database) -> [KeyProviderKind] {
        var kinds: [KeyProviderKind] = []
        for row in (try? KeySlots.unchecked(database)) ?? [] where !kinds.contains(row.kind) {
            guard let traits = row.kind.traits, traits.make != nil, !traits.capabilities.contains(.asksForPassphrase) else { continue }
            kinds.append(row.kind)
        }
        return kinds
    }

    /// Whether an open that failed with `error` may try the next slot's provider: the key is
    /// not reachable this way (missing, locked away, its service or TPM absent, another kind).
    static func mayTryNextSlot(after error: Error) -> Bool {
        guard let error = error as? TokenStoreError else { return false }
        switch error.code {
        case .dataKeyMissing, .secretServiceUnavailable, .keyringLocked, .timedOut, .wrongKeyProvider, .tpmUnavailable,
            .tpmMismatch:
            return true
        default:
            return false
        }
    }
}
