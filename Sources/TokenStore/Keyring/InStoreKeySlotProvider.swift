import FoundationEssentials

/// A key provider whose key is wrapped in the store's own `key_slots` row (a recovery key, a TPM
/// PIN slot): it keeps nothing outside the database, and the store's open unwraps the row's blob.
protocol InStoreKeySlotProvider: KeyProvider {
    /// What a new `key_slots` row keeps wrapped: the secret half of the slot's key pair (the
    /// data key itself for a slot added at schema version 16).
    func wrap(_ key: SecretBytes, reference: DataKeyReference) throws -> [UInt8]
    /// What ``wrap(_:reference:)`` wrapped, out of a `key_slots` row's blob.
    func unwrap(_ blob: [UInt8], reference: DataKeyReference) throws -> SecretBytes
    /// "a recovery key slot", for the `dataKeyMissing` of a store without one.
    var slotNoun: String { get }
}
