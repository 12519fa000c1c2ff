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

    /// Keyed BLAKE2b of `domain ‖ (UInt32 little-endian length ‖ bytes)…`, the fields fed one at
    /// a time through libsodium's streaming API: the digest of the joined message without making
    /// it (no array per field nor for the message; the state lives on the stack and is wiped).
    static func fields(
        key: UnsafeRawBufferPointer, domain: UInt8, length: Int = 32, _ feed: (inout Fields) -> Void
    ) -> [UInt8] {
        Sodium.ensureInitialized()
        return withUnsafeTemporaryAllocation(byteCount: crypto_generichash_statebytes(), alignment: 64) { buffer in
            let state = OpaquePointer(buffer.baseAddress!)
            defer { sodium_memzero(buffer.baseAddress, buffer.count) }
            let rc = crypto_generichash_init(state, key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count, length)
            precondition(rc == 0, "crypto_generichash_init failed with valid parameters")
            var fields = Fields(state: state)
            fields.raw(domain)
            feed(&fields)
            var out = [UInt8](repeating: 0, count: length)
            let done = crypto_generichash_final(state, &out, length)
            precondition(done == 0, "crypto_generichash_final failed")
            return out
        }
    }

    /// The fields of one ``fields(key:domain:length:_:)`` digest, each length-prefixed.
    struct Fields {
        fileprivate let state: OpaquePointer

        mutating func field(_ bytes: UnsafeRawBufferPointer) {
            var length = UInt32(bytes.count).littleEndian
            withUnsafeBytes(of: &length) { update($0) }
            update(bytes)
        }

        mutating func field(_ bytes: [UInt8]) { bytes.withUnsafeBytes { field($0) } }

        /// The string's UTF-8 bytes (a native string's own storage: no copy).
        mutating func field(_ text: String) {
            var text = text
            text.withUTF8 { field(UnsafeRawBufferPointer($0)) }
        }

        /// A one-byte field (its length prefix included).
        mutating func field(byte: UInt8) { withUnsafeBytes(of: byte) { field($0) } }

        fileprivate mutating func raw(_ byte: UInt8) { withUnsafeBytes(of: byte) { update($0) } }

        private func update(_ bytes: UnsafeRawBufferPointer) {
            // An empty field's buffer may have no address: BLAKE2b reads nothing then.
            let rc = crypto_generichash_update(state, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
            precondition(rc == 0, "crypto_generichash_update failed")
        }
    }
}
