/// Comparisons whose time does not depend on where two values differ.
enum ConstantTime {
    /// Equality whose time depends only on the lengths (for `state` and `nonce`).
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
