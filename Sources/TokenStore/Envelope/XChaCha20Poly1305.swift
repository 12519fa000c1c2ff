internal import CSodium

/// XChaCha20-Poly1305-IETF (libsodium) over caller-given buffers: the AEAD itself, which
/// ``Sealer`` frames (version, random nonce, associated data of the row) and calls for every
/// sealed value. `package` so the test suite checks this very code against published vectors.
///
/// Every size is checked here and a wrong one refused (never a trap): a 32-byte key, a 24-byte
/// nonce, an output exactly as long as the result.
package enum XChaCha20Poly1305 {
    package static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    package static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    package static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// Encrypts `plaintext` into `output` as ciphertext ‖ tag (`plaintext.count + tagBytes` bytes).
    /// `output` must not overlap the inputs.
    /// - Returns: false, with nothing written, when a size is wrong.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard key.count == keyBytes, nonce.count == nonceBytes, output.count == plaintext.count + tagBytes,
            let keyBytes = key.baseAddress, let nonceBytes = nonce.baseAddress, let out = output.baseAddress
        else { return false }
        var written: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(
            out.assumingMemoryBound(to: UInt8.self), &written,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(associatedData.count), nil,
            nonceBytes.assumingMemoryBound(to: UInt8.self), keyBytes.assumingMemoryBound(to: UInt8.self))
        return rc == 0 && Int(written) == output.count
    }

    /// Decrypts `sealed` (ciphertext ‖ tag) into `output` (`sealed.count - tagBytes` bytes) if
    /// the tag authenticates it with `associatedData`, `nonce` and `key`.
    /// - Returns: false when it does not (what `output` then holds is not to be used) or a size is wrong.
    package static func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard key.count == keyBytes, nonce.count == nonceBytes, sealed.count >= tagBytes,
            output.count == sealed.count - tagBytes, let keyBytes = key.baseAddress, let nonceBytes = nonce.baseAddress,
            let input = sealed.baseAddress
        else { return false }
        var written: UInt64 = 0
        // libsodium writes no byte of an empty message but wants somewhere to (not NULL: that
        // means "verify only"); a byte on the stack stands in.
        var empty: UInt8 = 0
        let rc = withUnsafeMutablePointer(to: &empty) { spare in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? spare, &written, nil,
                input.assumingMemoryBound(to: UInt8.self), UInt64(sealed.count),
                associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(associatedData.count),
                nonceBytes.assumingMemoryBound(to: UInt8.self), keyBytes.assumingMemoryBound(to: UInt8.self))
        }
        return rc == 0 && Int(written) == output.count
    }
}
