/// Makes text from the store (account and service names, labels, profile fields) safe to
/// print in a terminal: control characters are shown as escapes instead of reaching it raw.
///
/// C0 controls (newline and ESC included), DEL and C1 controls become `\x1b`-style escapes;
/// line and paragraph separators and bidirectional overrides become `\u{202e}`-style ones.
/// So an account named `evil\e]0;pwned\a` can neither retitle the window nor clear the screen,
/// and a newline cannot forge a row. JSON output is never escaped this way: it stays exact.
enum TerminalEscaping {
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if !needsEscape(scalar) {
                out.unicodeScalars.append(scalar)
            } else if scalar.value <= 0xff {
                out += "\\x" + hex(scalar.value, digits: 2)
            } else {
                out += "\\u{" + hex(scalar.value, digits: 4) + "}"
            }
        }
        return out
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1f, 0x7f...0x9f: return true  // C0, DEL, C1
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x202a...0x202e, 0x2066...0x2069, 0x200e, 0x200f: return true  // bidirectional controls
        default: return false
        }
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
