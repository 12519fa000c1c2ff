internal import CSodium

/// SHA-256 through libsodium (`crypto_hash_sha256`), which every process of the library loads
/// anyway (libcrypto is loaded only for RS256 and software ES256): the one SHA-256 of the package.
package enum SHA256Digest {
    /// The 32-byte SHA-256 digest of `bytes`.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        Sodium.ensureInitialized()
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let status = digest.withUnsafeMutableBufferPointer { output in
            crypto_hash_sha256(
                output.baseAddress!, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
        }
        // crypto_hash_sha256 has no failure case; it returns 0.
        precondition(status == 0, "libsodium could not compute SHA-256")
        return digest
    }

    /// The SHA-256 digest of `bytes`.
    package static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        let array = Array(bytes)
        return array.withUnsafeBytes { hash($0) }
    }
}
