/// A JSON value decoded strictly: a number is never read as a boolean nor the reverse, and a
/// number is kept as a `Double` (exact for every date a token carries).
enum JSONValue: Decodable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The string, if this is one.
    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, if this is a finite one.
    var number: Double? {
        if case .number(let value) = self, value.isFinite { return value }
        return nil
    }

    /// The object, if this is one.
    var object: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }
}
