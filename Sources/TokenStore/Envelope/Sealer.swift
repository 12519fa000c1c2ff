internal import CSodium

/// XChaCha20-Poly1305-IETF sealing of one value (``XChaCha20Poly1305``), bound to where it is stored.
///
/// Blob layout: `version (1) ‖ nonce (24) ‖ ciphertext ‖ tag (16)`. The associated data
/// binds the store id, key id, record kind and the row's lookup key, so a blob copied to
/// another row, kind, table or store fails to open. `package` for the fuzz target.
package enum Sealer {
    static let version: UInt8 = 1
    static let nonceBytes = XChaCha20Poly1305.nonceBytes
    static let tagBytes = XChaCha20Poly1305.tagBytes
    static let overhead = 1 + nonceBytes + tagBytes

    /// What a sealed value is bound to.
    package struct Binding {
        let storeID: [UInt8]
        let keyID: [UInt8]
        let kind: RecordKind
        let rowKey: [UInt8]

        package init(storeID: [UInt8], keyID: [UInt8], kind: RecordKind, rowKey: [UInt8]) {
            self.storeID = storeID
            self.keyID = keyID
            self.kind = kind
            self.rowKey = rowKey
        }

        private static let prefix = Array("tokenstore/v1".utf8)

        /// Calls `body` with `"tokenstore/v1" ‖ (length u8 ‖ bytes)` of the store id, the key id,
        /// the kind and the row key, laid out on the stack (no allocation: every read builds it).
        func withAssociatedData<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            let count = Self.prefix.count + 5 + storeID.count + keyID.count + rowKey.count
            return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { ad in
                var offset = 0
                func put(_ bytes: [UInt8]) {
                    bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: ad[offset..<(offset + $0.count)]).copyMemory(from: $0) }
                    offset += bytes.count
                }
                func put(_ byte: UInt8) {
                    ad[offset] = byte
                    offset += 1
                }
                put(Self.prefix)
                put(UInt8(truncatingIfNeeded: storeID.count))
                put(storeID)
                put(UInt8(truncatingIfNeeded: keyID.count))
                put(keyID)
                put(1)
                put(kind.rawValue)
                put(UInt8(truncatingIfNeeded: rowKey.count))
                put(rowKey)
                precondition(offset == count)
                return try body(UnsafeRawBufferPointer(ad))
            }
        }
    }

    package static func seal(_ plaintext: UnsafeRawBufferPointer, key: DataKey, binding: Binding) -> [UInt8] {
        var blob = [UInt8](repeating: 0, count: overhead + plaintext.count)
        blob[0] = version
        blob.withUnsafeMutableBytes { out in
            let nonce = UnsafeMutableRawBufferPointer(rebasing: out[1..<(1 + nonceBytes)])
            randombytes_buf(nonce.baseAddress!, nonceBytes)
            let sealed = key.sealingKey.withUnsafeBytes { k in
                binding.withAssociatedData { ad in
                    XChaCha20Poly1305.seal(
                        plaintext, associatedData: ad, nonce: UnsafeRawBufferPointer(nonce), key: k,
                        into: UnsafeMutableRawBufferPointer(rebasing: out[(1 + nonceBytes)...]))
                }
            }
            precondition(sealed, "XChaCha20-Poly1305 encryption failed")
        }
        return blob
    }

    /// Opens a blob into guarded memory.
    /// - Throws: `integrityCheckFailed` when the blob is malformed or does not authenticate.
    package static func open(_ blob: [UInt8], key: DataKey, binding: Binding) throws -> SecretBytes {
        try blob.withUnsafeBytes { try open($0, key: key, binding: binding) }
    }

    /// ``open(_:key:binding:)`` of bytes lent by their owner (a column of a row being read: no copy).
    static func open(_ blob: UnsafeRawBufferPointer, key: DataKey, binding: Binding) throws -> SecretBytes {
        guard blob.count >= overhead, blob[0] == version else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed \(binding.kind) record is malformed.")
        }
        let plainCount = blob.count - overhead
        var ok = false
        let plaintext = SecretBytes(count: plainCount) { out in
            ok = key.sealingKey.withUnsafeBytes { k in
                binding.withAssociatedData { ad in
                    XChaCha20Poly1305.open(
                        UnsafeRawBufferPointer(rebasing: blob[(1 + nonceBytes)...]), associatedData: ad,
                        nonce: UnsafeRawBufferPointer(rebasing: blob[1..<(1 + nonceBytes)]), key: k, into: out)
                }
            }
        }
        guard ok else {
            throw TokenStoreError(
                .integrityCheckFailed, "A sealed \(binding.kind) record failed authentication: it was altered or moved.")
        }
        return plaintext
    }
}

/// What a sealed blob holds; part of the associated data.
package enum RecordKind: UInt8, CustomStringConvertible {
    case keyCheck = 1
    case item = 2
    case credentialUser = 3
    case pendingRevocation = 4
    case accessToken = 5
    case dpop = 6
    case discovery = 7
    /// A row of the change log (``ChangeLog``).
    case changeEvent = 8

    package var description: String {
        switch self {
        case .keyCheck: return "key-check"
        case .item: return "item"
        case .credentialUser: return "credential-state"
        case .pendingRevocation: return "pending-revocation"
        case .accessToken: return "access-token"
        case .dpop: return "dpop"
        case .discovery: return "discovery"
        case .changeEvent: return "change"
        }
    }
}
