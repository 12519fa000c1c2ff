internal import CSodium

/// BLAKE2b (libsodium `crypto_generichash`), unkeyed for checksums and keyed for lookups.
enum Blake2b {
    static func digest(_ message: [UInt8], key: UnsafeRawBufferPointer? = nil, length: Int = 32) -> [UInt8] {
        message.withUnsafeBytes { digest($0, key: key, length: length) }
    }

    /// The digest of bytes held elsewhere (a secret in guarded memory), without copying them.
    static func digest(_ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer?, length: Int = 32) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: length)
        let keyPointer = key?.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let rc = crypto_generichash(
            &out, length, message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count), keyPointer,
            key?.count ?? 0)
        precondition(rc == 0, "crypto_generichash failed with valid parameters")
        return out
    }

    static func hexDigest(_ message: [UInt8]) -> String { Hex.encode(digest(message)) }
}
