import FoundationEssentials

/// What the key files of the passphrase provider (``WrappedKeyFile``) and the portal provider
/// (``PortalKeyFile``) share: a 32-byte data key sealed with XChaCha20-Poly1305 under a key the
/// file's header derives (Argon2id of the passphrase, or a subkey of the portal's secret), with
/// the header and the key's reference as associated data; and an unkeyed BLAKE2b checksum over
/// everything before it, so that damage is told apart from a wrong secret.
enum WrappedKey {
    /// The sealed key's length: the key and the tag.
    static let sealedCount = 32 + 16

    /// `key` (32 bytes) sealed under `kek`.
    static func seal(_ key: SecretBytes, kek: UnsafeRawBufferPointer, associatedData: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard key.count == 32 else { throw TokenStoreError(.invalidInput, "A data key must be 32 bytes, not \(key.count).") }
        var sealed = [UInt8](repeating: 0, count: sealedCount)
        let done = key.withUnsafeBytes { plain in
            associatedData.withUnsafeBytes { ad in
                nonce.withUnsafeBytes { nonce in
                    sealed.withUnsafeMutableBytes { out in
                        XChaCha20Poly1305.seal(plain, associatedData: ad, nonce: nonce, key: kek, into: out)
                    }
                }
            }
        }
        guard done else { throw TokenStoreError(.ioError, "Wrapping the data key failed.") }
        return sealed
    }

    /// The key sealed in `sealed`, or nil when it does not open under `kek`.
    static func open(_ sealed: [UInt8], kek: UnsafeRawBufferPointer, associatedData: [UInt8], nonce: [UInt8]) -> SecretBytes? {
        var opened = false
        let key = SecretBytes(count: 32) { out in
            associatedData.withUnsafeBytes { ad in
                nonce.withUnsafeBytes { nonce in
                    sealed.withUnsafeBytes { sealed in
                        opened = XChaCha20Poly1305.open(sealed, associatedData: ad, nonce: nonce, key: kek, into: out)
                    }
                }
            }
        }
        return opened ? key : nil
    }

    /// `body` followed by its checksum.
    static func checksummed(_ body: [UInt8]) -> [UInt8] { body + Blake2b.digest(body) }

    /// The body of a file of `count` bytes whose checksum holds; nil when the length or the
    /// checksum is wrong (the caller says which file was damaged).
    static func body(of bytes: [UInt8], count: Int) -> (body: [UInt8], failure: String?) {
        guard bytes.count == count else { return ([], "length") }
        let body = Array(bytes[0..<(count - 32)])
        guard ConstantTime.equal(Blake2b.digest(body), Array(bytes[(count - 32)...])) else { return ([], "checksum") }
        return (body, nil)
    }
}
