internal import CSodium

/// The store's 256-bit data key and the subkeys derived from it, in guarded memory.
///
/// The sealing key is the data key itself; the lookup key (for the keyed hashes that
/// replace identifiers in the database) is derived with `crypto_kdf_derive_from_key`.
package final class DataKey: Sendable {
    static let byteCount = 32

    let keyID: [UInt8]
    let material: SecretBytes
    private let lookupKey: SecretBytes

    package init(keyID: [UInt8], material: SecretBytes) throws {
        guard material.count == Self.byteCount else {
            throw TokenStoreError(
                .dataKeyCorrupt, "The data key from the key provider has the wrong length (\(material.count) bytes).")
        }
        self.keyID = keyID
        self.material = material
        lookupKey = SecretBytes(count: 32) { out in
            material.withUnsafeBytes { master in
                _ = crypto_kdf_derive_from_key(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, 1, "tslookup",
                    master.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// A new random key.
    static func generate() throws -> DataKey {
        try DataKey(keyID: Array(SecretBytes.random(count: 16).copyBytes()), material: .random(count: byteCount))
    }

    /// Keyed BLAKE2b over length-prefixed fields, with a one-byte domain tag.
    func lookupHash(domain: UInt8, _ fields: [[UInt8]]) -> [UInt8] {
        var message: [UInt8] = [domain]
        for field in fields {
            var length = UInt32(field.count).littleEndian
            withUnsafeBytes(of: &length) { message.append(contentsOf: $0) }
            message.append(contentsOf: field)
        }
        return lookupKey.withUnsafeBytes { Blake2b.digest(message, key: $0) }
    }
}
