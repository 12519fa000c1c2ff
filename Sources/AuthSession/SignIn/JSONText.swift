/// Writing JSON text by hand where a few fixed members are put together (a DPoP proof's claims,
/// tokenctl's output): the one string-literal escaper for both.
package enum JSONText {
    /// `text` as a JSON string literal (RFC 8259 7): quotes, backslashes and control characters
    /// escaped; DEL, U+2028 and U+2029 too, so the text is also safe inside JavaScript.
    package static func quoted(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar == "\u{2028}" || scalar == "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }
}
