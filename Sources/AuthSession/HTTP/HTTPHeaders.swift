/// HTTP header fields with case-insensitive names, in the order they were added.
///
/// ```swift
/// var headers = HTTPHeaders(["Content-Type": "application/json"])
/// headers["content-type"]   // "application/json"
/// ```
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as (name, value) pairs, names as given.
    public private(set) var fields: [(name: String, value: String)]

    /// No fields.
    public init() { fields = [] }

    /// Fields from a dictionary (order of a dictionary is unspecified).
    public init(_ dictionary: [String: String]) {
        fields = dictionary.map { (name: $0.key, value: $0.value) }
    }

    /// Fields from (name, value) pairs, in order.
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { (name: $0.0, value: $0.1) }
    }

    /// Fields from a dictionary literal, in order.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of the field `name` (any case), or `nil`. Setting replaces every
    /// field of that name; setting `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { Self.same($0.name, name) }?.value }
        set {
            let index = fields.firstIndex { Self.same($0.name, name) }
            fields.removeAll { Self.same($0.name, name) }
            if let newValue { fields.insert((name: name, value: newValue), at: Swift.min(index ?? fields.count, fields.count)) }
        }
    }

    /// Every value of the field `name` (any case), in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.same($0.name, name) }.map(\.value)
    }

    /// Adds a field, keeping any existing one with the same name.
    public mutating func add(name: String, value: String) {
        fields.append((name: name, value: value))
    }

    /// Iterates over (name, value) pairs.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// Equal when the same names (any case) carry the same values in the same order.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { same($0.name, $1.name) && $0.value == $1.value }
    }

    private static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}
