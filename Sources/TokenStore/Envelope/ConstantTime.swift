internal import CSodium

/// The package's one constant-time comparison (libsodium's `sodium_memcmp`): its time depends
/// only on the lengths, never on where two values differ. For MACs, checksums, verifiers, the
/// sign-in `state` and `nonce`, and ``SecretBytes`` equality.
package enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes (two empty values are equal).
    package static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { a in b.withUnsafeBytes { b in equal(a, b) } }
    }

    /// Whether two buffers hold the same bytes (two empty buffers are equal).
    package static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let first = a.baseAddress, let second = b.baseAddress, a.count > 0 else { return true }
        return sodium_memcmp(first, second, a.count) == 0
    }
}
