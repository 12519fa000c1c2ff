import Foundation
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
    static func encode(_ fields: [(String, FormValue)]) -> Data {
        var body: [UInt8] = []
        for (index, field) in fields.enumerated() {
            if index > 0 { body.append(UInt8(ascii: "&")) }
            append(Array(field.0.utf8), to: &body)
            body.append(UInt8(ascii: "="))
            switch field.1 {
            case .text(let text):
                append(Array(text.utf8), to: &body)
            case .secret(let secret):
                secret.withUnsafeBytes { append($0, to: &body) }
            }
        }
        let data = Data(body)
        // Overwrite the temporary copy; the Data is the one copy handed to the transport.
        body.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices { buffer[index] = 0 }
        }
        return data
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

    private static func append<Bytes: Sequence>(_ bytes: Bytes, to body: inout [UInt8]) where Bytes.Element == UInt8 {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"),
                UInt8(ascii: "."), UInt8(ascii: "_"):
                body.append(byte)
            case UInt8(ascii: " "):
                body.append(UInt8(ascii: "+"))
            default:
                body.append(UInt8(ascii: "%"))
                body.append(hex[Int(byte >> 4)])
                body.append(hex[Int(byte & 0x0F)])
            }
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
