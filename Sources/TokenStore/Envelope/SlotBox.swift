internal import CSodium
import FoundationEssentials

/// A key slot's box (schema version 17, ``KeySlots``): an X25519 key pair made for the slot,
/// whose secret half the slot's provider keeps, and the data key sealed to its public half
/// (libsodium `crypto_box_seal`: an ephemeral X25519 key, XSalsa20-Poly1305). Re-sealing a new
/// data key needs only the public half, so a key rotation reaches every slot without its
/// secret.
enum SlotBox {
    static let publicKeyCount = Int(crypto_box_publickeybytes())
    static let secretKeyCount = Int(crypto_box_secretkeybytes())

    /// A new key pair; the secret half in guarded memory.
    static func keyPair() -> (publicKey: [UInt8], secretKey: SecretBytes) {
        var publicKey = [UInt8](repeating: 0, count: publicKeyCount)
        let secretKey = SecretBytes(count: secretKeyCount) { buffer in
            _ = publicKey.withUnsafeMutableBufferPointer { crypto_box_keypair($0.baseAddress!, buffer.bindMemory(to: UInt8.self).baseAddress!) }
        }
        return (publicKey, secretKey)
    }

    /// `key` sealed to `publicKey`.
    static func seal(_ key: SecretBytes, to publicKey: [UInt8]) throws -> [UInt8] {
        guard publicKey.count == publicKeyCount else { throw KeySlots.altered() }
        var boxed = [UInt8](repeating: 0, count: key.count + Int(crypto_box_sealbytes()))
        let result = key.withUnsafeBytes { message in
            boxed.withUnsafeMutableBufferPointer { out in
                crypto_box_seal(out.baseAddress!, message.bindMemory(to: UInt8.self).baseAddress!, UInt64(message.count), publicKey)
            }
        }
        guard result == 0 else { throw TokenStoreError(.ioError, "A key slot's box could not be sealed.") }
        return boxed
    }

    /// The key sealed in `boxed`, opened with the slot's key pair.
    /// - Throws: `integrityCheckFailed` when it does not open (a box altered or swapped, or the
    ///   secret half of another slot).
    static func open(_ boxed: [UInt8], publicKey: [UInt8], secretKey: SecretBytes) throws -> SecretBytes {
        let sealBytes = Int(crypto_box_sealbytes())
        guard publicKey.count == publicKeyCount, secretKey.count == secretKeyCount, boxed.count > sealBytes else {
            throw KeySlots.altered()
        }
        var failed = false
        let key = SecretBytes(count: boxed.count - sealBytes) { out in
            let result = secretKey.withUnsafeBytes { secret in
                crypto_box_seal_open(
                    out.bindMemory(to: UInt8.self).baseAddress!, boxed, UInt64(boxed.count), publicKey,
                    secret.bindMemory(to: UInt8.self).baseAddress!)
            }
            failed = result != 0
        }
        guard !failed else { throw KeySlots.altered() }
        return key
    }
}
