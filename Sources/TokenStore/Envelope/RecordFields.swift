/// The plaintext layout inside a sealed blob: `'T' ‖ version ‖ (tag u8 ‖ length u32le ‖ bytes)*`.
///
/// Decoding never trusts a length: every field is bounds-checked, duplicate tags and
/// trailing bytes are rejected. The decoder is what the `fuzz_decoders` target drives
/// (`package` for that target).
package struct RecordFields {
    enum Tag: UInt8 {
        case service = 1, account = 2, itemKind = 3, secret = 4, label = 5, expiresAt = 6, scopes = 7
        case appleUserID = 8, keyCheck = 9, userID = 10, credentialState = 11, audience = 12
        case requestedScopes = 13, declinedScopes = 14
        case dpopEntry = 15, dpopName = 16, dpopResidence = 17, tokenType = 18
        /// A server's issuer, and (schema 13 on) a discovery document as fetched, the RFC 8414
        /// document that supplied its revocation endpoint, and when it was fetched.
        case issuer = 19, document = 20, supplement = 21, fetchedAt = 22
        /// The endpoints a refresh token is bound to (in its item and its outbox entry), or a
        /// discovery document's previous ones when they changed (with `changedAt`).
        case tokenEndpoint = 23, revocationEndpoint = 24, changedAt = 25
        /// In a change-log row (schema 14): the change's kind and the credential state it left.
        case changeKind = 26, fromState = 27
        /// In a credential state: the MAC of its user's last history row (schema 7 on).
        case historyHead = 32
    }

    static let magic: UInt8 = 0x54
    static let version: UInt8 = 1

    package private(set) var entries: [(tag: UInt8, bytes: [UInt8])] = []
    /// The secret field, kept out of ordinary arrays.
    package private(set) var secret: SecretBytes?

    init() {}

    mutating func set(_ tag: Tag, _ bytes: [UInt8]) { entries.append((tag.rawValue, bytes)) }
    mutating func set(_ tag: Tag, _ text: String) { set(tag, Array(text.utf8)) }
    mutating func set(_ tag: Tag, int value: Int64) {
        var little = value.littleEndian
        set(tag, withUnsafeBytes(of: &little) { Array($0) })
    }
    mutating func setSecret(_ value: SecretBytes) { secret = value }

    func bytes(_ tag: Tag) -> [UInt8]? { entries.first { $0.tag == tag.rawValue }?.bytes }
    func string(_ tag: Tag) -> String? { bytes(tag).map { String(decoding: $0, as: UTF8.self) } }
    func int(_ tag: Tag) -> Int64? {
        guard let raw = bytes(tag), raw.count == 8 else { return nil }
        return raw.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) }
    }

    /// Serializes into guarded memory (the result holds the secret).
    package func encode() -> SecretBytes {
        let secretCount = secret?.count ?? 0
        let total = 2 + entries.reduce(0) { $0 + 5 + $1.bytes.count } + (secret == nil ? 0 : 5 + secretCount)
        return SecretBytes(count: total) { out in
            var offset = 0
            func put(_ byte: UInt8) { out[offset] = byte; offset += 1 }
            func putHeader(_ tag: UInt8, _ count: Int) {
                put(tag)
                for shift in stride(from: 0, to: 32, by: 8) { put(UInt8(truncatingIfNeeded: count >> shift)) }
            }
            put(Self.magic)
            put(Self.version)
            for entry in entries {
                putHeader(entry.tag, entry.bytes.count)
                for byte in entry.bytes { put(byte) }
            }
            if let secret {
                putHeader(Tag.secret.rawValue, secretCount)
                secret.withUnsafeBytes { source in
                    if secretCount > 0 {
                        UnsafeMutableRawBufferPointer(rebasing: out[offset..<(offset + secretCount)]).copyMemory(from: source)
                    }
                }
                offset += secretCount
            }
            precondition(offset == total)
        }
    }

    /// Parses a decrypted record held in guarded memory; the secret field stays in that memory
    /// (no copy).
    /// - Throws: `integrityCheckFailed` when the layout is not valid.
    static func decode(_ plaintext: SecretBytes) throws -> RecordFields {
        try plaintext.withUnsafeBytes { try decode($0, sharing: plaintext) }
    }

    /// Parses a decrypted record.
    /// - Throws: `integrityCheckFailed` when the layout is not valid.
    package static func decode(_ plaintext: UnsafeRawBufferPointer) throws -> RecordFields {
        try decode(plaintext, sharing: nil)
    }

    /// Parses `plaintext`; the secret field is copied, or shared with `owner` (whose bytes
    /// `plaintext` are) when given.
    private static func decode(_ plaintext: UnsafeRawBufferPointer, sharing owner: SecretBytes?) throws -> RecordFields {
        var fields = RecordFields()
        fields.entries.reserveCapacity(8)
        try forEachField(in: plaintext) { tag, offset, body in
            if tag == Tag.secret.rawValue {
                fields.secret = owner.map { SecretBytes(sharing: $0, offset: offset, count: body.count) } ?? SecretBytes(body)
            } else {
                fields.entries.append((tag, Array(body)))
            }
        }
        return fields
    }

    /// Checks the layout of a decrypted record and calls `visit` with each field: its tag, the
    /// offset of its bytes in `plaintext`, and those bytes (lent: valid during the call). Copies
    /// nothing (the read of one secret goes through here without ``decode(_:)``'s arrays).
    /// - Throws: `integrityCheckFailed` when the layout is not valid (a bad header, a length past
    ///   the end, a duplicate tag); what `visit` throws.
    static func forEachField(
        in plaintext: UnsafeRawBufferPointer, _ visit: (_ tag: UInt8, _ offset: Int, _ body: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        func malformed(_ why: String) -> TokenStoreError {
            TokenStoreError(.integrityCheckFailed, "A sealed record has an invalid layout (\(why)).")
        }
        guard plaintext.count >= 2, plaintext[0] == magic else { throw malformed("header") }
        guard plaintext[1] == version else { throw malformed("unknown version") }
        var seen = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))  // one bit a tag
        var offset = 2
        while offset < plaintext.count {
            guard plaintext.count - offset >= 5 else { throw malformed("truncated field header") }
            let tag = plaintext[offset]
            var length = 0
            for index in 0..<4 { length |= Int(plaintext[offset + 1 + index]) << (8 * index) }
            offset += 5
            guard length <= plaintext.count - offset else { throw malformed("field length past the end") }
            let bit = UInt64(1) << UInt64(tag & 63)
            let isNew: Bool
            switch tag >> 6 {
            case 0: isNew = seen.0 & bit == 0; seen.0 |= bit
            case 1: isNew = seen.1 & bit == 0; seen.1 |= bit
            case 2: isNew = seen.2 & bit == 0; seen.2 |= bit
            default: isNew = seen.3 & bit == 0; seen.3 |= bit
            }
            guard isNew else { throw malformed("duplicate field") }
            try visit(tag, offset, UnsafeRawBufferPointer(rebasing: plaintext[offset..<(offset + length)]))
            offset += length
        }
    }
}
