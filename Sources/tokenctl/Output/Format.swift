import Foundation
import TokenStore

/// Formatting shared by the commands: dates, file modes, optional values and migrations, as text and as JSON.
enum Format {
    /// `2025-01-02T10:00:00Z`: UTC, whole seconds.
    static func date(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0,
            c.minute ?? 0, c.second ?? 0)
    }

    static func date(_ date: Date?) -> JSONValue { date.map { .string(Self.date($0)) } ?? .null }

    /// `0600`, or `-` for a missing file.
    static func mode(_ mode: Int?) -> String {
        guard let mode else { return "-" }
        let octal = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - octal.count)) + octal
    }

    static func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }

    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }

    /// A schema migration as `status` and `migrate` show it in JSON.
    static func migration(_ migration: StoreInspection.MigrationInfo) -> JSONValue {
        ["version": .int(migration.version), "name": .string(migration.name)]
    }
}
