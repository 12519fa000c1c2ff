import FoundationEssentials
import TokenStore

/// One value of an `application/x-www-form-urlencoded` body.
enum FormValue {
    /// Plain text.
    case text(String)
    /// A secret, percent-encoded straight from its guarded bytes (never made a `String`).
    case secret(SecretBytes)
}

/// `application/x-www-form-urlencoded` encoding (WHATWG URL standard): unreserved
/// characters `A–Z a–z 0–9 * - . _` as is, space as `+`, every other byte as `%XX`.
enum FormEncoding {
    static let contentType = "application/x-www-form-urlencoded"

    /// Encodes `fields` in order into a request body.
    ///
    /// The body is written once into memory of exactly its size (no growth leaves a partial
    /// copy behind) and comes back as a `Data` that wipes that memory when released, so the
    /// tokens in a form do not outlive the request (the transport sends from this memory).
    static func encode(_ fields: [(String, FormValue)]) -> Data {
        var length = 0
        walk(fields) { length += $0 }
        var memory = WipedMemory(capacity: length)
        walk(fields) { _ in } write: { chunk in _ = memory.append(chunk, limit: length) }
        return memory.takeData()
    }

    /// Calls `count` with the encoded length of each piece, and `write` with its encoded bytes.
    private static func walk(
        _ fields: [(String, FormValue)], count: (Int) -> Void,
        write: (UnsafeRawBufferPointer) -> Void = { _ in }
    ) {
        func emit(_ bytes: UnsafeRawBufferPointer) {
            count(encodedLength(bytes))
            encode(bytes, into: write)
        }
        for (index, field) in fields.enumerated() {
            if index > 0 { literal(UInt8(ascii: "&"), count: count, write: write) }
            var name = field.0
            name.withUTF8 { emit(UnsafeRawBufferPointer($0)) }
            literal(UInt8(ascii: "="), count: count, write: write)
            switch field.1 {
            case .text(var text):
                text.withUTF8 { emit(UnsafeRawBufferPointer($0)) }
            case .secret(let secret):
                secret.withUnsafeBytes { emit($0) }
            }
        }
    }

    private static func literal(_ byte: UInt8, count: (Int) -> Void, write: (UnsafeRawBufferPointer) -> Void) {
        count(1)
        withUnsafeBytes(of: byte) { write($0) }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: " "):
            return true
        default:
            return false
        }
    }

    private static func encodedLength(_ bytes: UnsafeRawBufferPointer) -> Int {
        bytes.reduce(0) { $0 + (isUnreserved($1) ? 1 : 3) }
    }

    /// Percent-encodes `bytes` through a small stack buffer (no heap copy of a secret).
    private static func encode(_ bytes: UnsafeRawBufferPointer, into write: (UnsafeRawBufferPointer) -> Void) {
        let hex: StaticString = "0123456789ABCDEF"
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 96) { buffer in
            var used = 0
            func flush() {
                write(UnsafeRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[0..<used]))
                used = 0
            }
            for byte in bytes {
                if used > buffer.count - 3 { flush() }
                if byte == UInt8(ascii: " ") {
                    buffer[used] = UInt8(ascii: "+")
                    used += 1
                } else if isUnreserved(byte) {
                    buffer[used] = byte
                    used += 1
                } else {
                    buffer[used] = UInt8(ascii: "%")
                    buffer[used + 1] = hex.utf8Start[Int(byte >> 4)]
                    buffer[used + 2] = hex.utf8Start[Int(byte & 0x0F)]
                    used += 3
                }
            }
            flush()
            // The stack buffer held secret bytes: overwrite it before it is reused.
            UnsafeMutableRawBufferPointer(buffer).initializeMemory(as: UInt8.self, repeating: 0)
        }
    }

    /// Decodes a form body back into pairs (for tests and diagnostics).
    static func decode(_ data: Data) -> [(String, String)] {
        data.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { part in
            let pieces = part.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let name = unescape(pieces.first.map(Array.init) ?? [])
            let value = unescape(pieces.count > 1 ? Array(pieces[1]) : [])
            return (name, value)
        }
    }

    private static func unescape(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                output.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                let value = UInt8(String(decoding: bytes[index + 1...index + 2], as: UTF8.self), radix: 16)
            {
                output.append(value)
                index += 2
            } else {
                output.append(byte)
            }
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }
}
