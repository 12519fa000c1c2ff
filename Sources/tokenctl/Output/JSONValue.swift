import AuthSession

/// A JSON value and its writer, for `--json` output: one document, object keys sorted,
/// two-space indentation, a newline at the end. Deterministic, so tests and scripts can
/// compare documents byte for byte.
///
/// ```swift
/// let document: JSONValue = ["account": .string(name), "items": .int(3), "pending": .null]
/// console.write(document.rendered())
/// ```
/// Never put a secret into a document unless the user asked with `--reveal`.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int)
    /// Non-finite numbers are written as `null`, since JSON has no spelling for them.
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The document as text: sorted keys, two-space indentation, trailing newline.
    func rendered() -> String {
        var output = ""
        write(to: &output, indentation: 0)
        return output + "\n"
    }

    private func write(to output: inout String, indentation: Int) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .int(let value): output += String(value)
        case .double(let value): output += value.isFinite ? "\(value)" : "null"
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let elements):
            guard !elements.isEmpty else { return output += "[]" }
            output += "[\n"
            for (index, element) in elements.enumerated() {
                output += Self.spaces(indentation + 1)
                element.write(to: &output, indentation: indentation + 1)
                output += index == elements.count - 1 ? "\n" : ",\n"
            }
            output += Self.spaces(indentation) + "]"
        case .object(let members):
            guard !members.isEmpty else { return output += "{}" }
            output += "{\n"
            let sorted = members.sorted { $0.key < $1.key }
            for (index, member) in sorted.enumerated() {
                output += Self.spaces(indentation + 1)
                Self.writeString(member.key, to: &output)
                output += ": "
                member.value.write(to: &output, indentation: indentation + 1)
                output += index == sorted.count - 1 ? "\n" : ",\n"
            }
            output += Self.spaces(indentation) + "}"
        }
    }

    private static func spaces(_ level: Int) -> String { String(repeating: "  ", count: level) }

    /// Writes a JSON string literal (``JSONText/quoted(_:)``).
    private static func writeString(_ string: String, to output: inout String) {
        output += JSONText.quoted(string)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    init(nilLiteral: ()) { self = .null }
    init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
