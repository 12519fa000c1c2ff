/// A data key sealed by a TPM, as ``TPMKeyProvider`` keeps it in its Secret Service item, or a
/// TPM-resident DPoP key's blob (``TPMSigningDoor``), which the session layer keeps sealed in the store.
///
/// Layout (version 1): the magic (`TSTP` for a data key, `TSDK` for a DPoP key), a version byte
/// (1), then three parts each preceded by its length (2 bytes, big-endian): the TPM name of the
/// primary key the object was made under, the object's TPM2B_PUBLIC and its TPM2B_PRIVATE (both
/// in the TPM's wire form). The private part is encrypted by the TPM under that primary key;
/// nothing in the blob is the key itself.
struct TPMSealedBlob: Equatable {
    /// What the blob holds: its magic and its name in error messages.
    enum Kind: Equatable {
        /// A sealed data key (``TPMKeyProvider``).
        case dataKey
        /// A DPoP signing key's TPM object (``TPMSigningDoor``).
        case signingKey

        var magic: [UInt8] { Array((self == .dataKey ? "TSTP" : "TSDK").utf8) }
        var noun: String { self == .dataKey ? "TPM-sealed key" : "TPM-resident DPoP key" }
    }

    static let magic: [UInt8] = Kind.dataKey.magic
    static let version: UInt8 = 1

    /// What the blob holds.
    var kind: Kind = .dataKey

    /// The TPM name (nameAlg + digest of the public area) of the primary key sealed under.
    var parentName: [UInt8]
    /// The sealed object's TPM2B_PUBLIC, marshalled.
    var publicPart: [UInt8]
    /// The sealed object's TPM2B_PRIVATE, marshalled.
    var privatePart: [UInt8]

    /// The blob's bytes.
    var encoded: [UInt8] {
        var bytes = kind.magic + [Self.version]
        for part in [parentName, publicPart, privatePart] {
            bytes += [UInt8(part.count >> 8), UInt8(part.count & 0xff)] + part
        }
        return bytes
    }

    /// Reads a blob.
    /// - Throws: `dataKeyCorrupt` when `bytes` are not a version-1 blob (for example a raw key of
    ///   a Secret Service store: the record check normally says `wrongKeyProvider` first).
    init(decoding bytes: [UInt8], kind: Kind = .dataKey) throws(TokenStoreError) {
        guard bytes.count > 5, Array(bytes.prefix(4)) == kind.magic else {
            let holder = kind == .dataKey ? "The key item" : "The blob"
            throw TokenStoreError(
                .dataKeyCorrupt, "\(holder) does not hold a \(kind.noun) (\(bytes.count) bytes); nothing was changed.")
        }
        guard bytes[4] == Self.version else {
            throw TokenStoreError(
                .dataKeyCorrupt, "The \(kind.noun) has version \(bytes[4]), which this version does not read; nothing was changed.")
        }
        var parts: [[UInt8]] = []
        var index = 5
        while parts.count < 3 {
            guard index + 2 <= bytes.count else { break }
            let count = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            index += 2
            guard index + count <= bytes.count else { break }
            parts.append(Array(bytes[index..<index + count]))
            index += count
        }
        guard parts.count == 3, index == bytes.count else {
            throw TokenStoreError(.dataKeyCorrupt, "The \(kind.noun) is truncated or has trailing bytes; nothing was changed.")
        }
        self.kind = kind
        parentName = parts[0]
        publicPart = parts[1]
        privatePart = parts[2]
    }

    init(kind: Kind = .dataKey, parentName: [UInt8], publicPart: [UInt8], privatePart: [UInt8]) {
        self.kind = kind
        self.parentName = parentName
        self.publicPart = publicPart
        self.privatePart = privatePart
    }
}
