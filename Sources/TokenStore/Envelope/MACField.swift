/// The byte forms of column values inside a row MAC (``Envelope/mac(_:_:)``): fixed-width
/// integers, and optionals with a presence byte so that `NULL` and an empty value differ.
enum MACField {
    static func int(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    static func text(_ value: String?) -> [UInt8] {
        guard let value else { return [0] }
        return [1] + Array(value.utf8)
    }

    static func blob(_ value: [UInt8]?) -> [UInt8] {
        guard let value else { return [0] }
        return [1] + value
    }

    static func name(_ table: String) -> [UInt8] { Array(table.utf8) }

    /// Whether two MACs are equal, in constant time (``ConstantTime``); an empty MAC never is.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        !a.isEmpty && ConstantTime.equal(a, b)
    }
}
