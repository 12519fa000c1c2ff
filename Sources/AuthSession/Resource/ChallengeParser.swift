/// The `WWW-Authenticate` grammar of RFC 9110 11.6.1 over one field value's bytes:
///
/// ```
/// challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
/// auth-param = token BWS "=" BWS ( token / quoted-string )
/// token68    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
/// ```
///
/// Challenges and their auth-params share one comma-separated list: an element that is a token
/// followed by `=` is a parameter of the challenge before it, any other token starts a new
/// challenge. Empty list elements are skipped (RFC 9110 5.6.1). A malformed element drops its
/// challenge and the parameters after it up to the next scheme. Linear in the input.
struct ChallengeParser {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// A challenge being read: its parameters so far, or `nil` while discarding a malformed one.
    private struct Pending {
        var scheme: String
        var token68: String?
        var parameters: [(name: String, value: String)] = []
    }

    mutating func parse() -> [AuthenticationChallenge] {
        var challenges: [AuthenticationChallenge] = []
        var current: Pending?
        var discarding = false
        func finish() {
            if let pending = current, !discarding {
                challenges.append(
                    AuthenticationChallenge(scheme: pending.scheme, token68: pending.token68, parameters: pending.parameters))
            }
            current = nil
            discarding = false
        }
        while true {
            skipListSeparators()
            guard index < bytes.count, challenges.count < AuthenticationChallenge.maximumChallenges else { break }
            guard let name = readToken() else {
                discarding = true
                skipElement()
                continue
            }
            let afterName = index
            skipWhitespace()
            if peek == UInt8(ascii: "=") {
                // An auth-param of the current challenge (or a stray one before any scheme).
                guard current != nil, !discarding, current?.token68 == nil,
                    let value = readParameterValue(), atElementEnd(),
                    current!.parameters.count < AuthenticationChallenge.maximumParameters
                else {
                    discarding = true
                    skipElement()
                    continue
                }
                let lowered = name.lowercased()
                if current!.parameters.contains(where: { $0.name == lowered }) {
                    discarding = true  // RFC 9110: each parameter name occurs once per challenge.
                } else {
                    current!.parameters.append((name: lowered, value: value))
                }
                continue
            }
            // A new challenge named `name`.
            finish()
            index = afterName
            current = Pending(scheme: name)
            guard index < bytes.count, bytes[index] != UInt8(ascii: ",") else { continue }
            guard bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") else {
                discarding = true
                skipElement()
                continue
            }
            skipWhitespace()
            if index >= bytes.count || bytes[index] == UInt8(ascii: ",") { continue }
            // Parameters are read by the loop; otherwise this must be a token68.
            let mark = index
            if looksLikeParameter() {
                index = mark
                continue
            }
            index = mark
            if let token68 = readToken68(), atElementEnd() {
                current!.token68 = token68
            } else {
                discarding = true
                skipElement()
            }
        }
        finish()
        return challenges
    }

    // MARK: Pieces

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    /// Whether an auth-param (token BWS "=" BWS value) starts here; moves `index`.
    private mutating func looksLikeParameter() -> Bool {
        guard readToken() != nil else { return false }
        skipWhitespace()
        guard peek == UInt8(ascii: "=") else { return false }
        index += 1
        skipWhitespace()
        return peek == UInt8(ascii: "\"") || peek.map(Self.isTokenCharacter) == true
    }

    /// `token / quoted-string` after the `=` (which is at `index`).
    private mutating func readParameterValue() -> String? {
        guard peek == UInt8(ascii: "=") else { return nil }
        index += 1
        skipWhitespace()
        if peek == UInt8(ascii: "\"") { return readQuotedString() }
        return readToken()
    }

    private mutating func readToken() -> String? {
        let start = index
        while index < bytes.count, Self.isTokenCharacter(bytes[index]) { index += 1 }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    private mutating func readToken68() -> String? {
        let start = index
        while index < bytes.count, Self.isToken68Character(bytes[index]) { index += 1 }
        guard index > start else { return nil }
        while index < bytes.count, bytes[index] == UInt8(ascii: "=") { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, unescaped; `nil` when unterminated or holding
    /// a control character (read on to its closing quote all the same, so that parsing resumes
    /// after it). Bytes of 0x80 and above (obs-text) are kept when they are UTF-8.
    private mutating func readQuotedString() -> String? {
        guard peek == UInt8(ascii: "\"") else { return nil }
        index += 1
        var value: [UInt8] = []
        var valid = true
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return valid ? String(validating: value, as: UTF8.self) : nil
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                if Self.isQuotedPairCharacter(bytes[index]) { value.append(bytes[index]) } else { valid = false }
                index += 1
            case 0x09, 0x20...0x7E, 0x80...0xFF:
                value.append(byte)
            default:
                valid = false
            }
        }
        return nil
    }

    /// Whether only whitespace is left before the next `,` or the end.
    private mutating func atElementEnd() -> Bool {
        skipWhitespace()
        return index >= bytes.count || bytes[index] == UInt8(ascii: ",")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") { index += 1 }
    }

    private mutating func skipListSeparators() {
        while index < bytes.count,
            bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") || bytes[index] == UInt8(ascii: ",")
        {
            index += 1
        }
    }

    /// Skips to the next `,` outside a quoted-string (or the end).
    private mutating func skipElement() {
        var quoted = false
        while index < bytes.count {
            let byte = bytes[index]
            if quoted {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    quoted = false
                }
            } else if byte == UInt8(ascii: "\"") {
                quoted = true
            } else if byte == UInt8(ascii: ",") {
                return
            }
            index += 1
        }
    }

    /// `tchar` (RFC 9110 5.6.2).
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func isToken68Character(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("-._~+/".utf8).contains(byte)
        }
    }

    /// `quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )`.
    private static func isQuotedPairCharacter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x7E).contains(byte) || byte >= 0x80
    }
}
