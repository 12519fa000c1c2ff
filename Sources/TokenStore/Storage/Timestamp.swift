import FoundationEssentials

/// Wall-clock time in milliseconds since 1970, the unit of every timestamp column.
enum Timestamp {
    static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    static func date(fromMillis millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
    /// Milliseconds since 1970, saturating: public entry points reject dates outside
    /// ``StoreLimits/dates`` first; this never traps on what slips through (NaN reads as 0).
    static func millis(from date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard !value.isNaN else { return 0 }
        if value >= 9.2e18 { return .max }
        if value <= -9.2e18 { return .min }
        return Int64(value)
    }
}
