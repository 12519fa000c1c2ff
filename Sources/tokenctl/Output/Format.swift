import FoundationEssentials
import TokenStore

/// Formatting shared by the commands: dates, file modes, optional values and migrations, as text and as JSON.
enum Format {
    /// `2025-01-02T10:00:00Z`: UTC, whole seconds (the proleptic Gregorian calendar).
    static func date(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let (days, second) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (dayNumber, secondOfDay) = second < 0 ? (days - 1, second + 86_400) : (days, second)
        let (year, month, day) = civilDate(daysSince1970: dayNumber)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))Z"
    }

    /// Year, month and day of a day count from 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func date(_ date: Date?) -> JSONValue { date.map { .string(Self.date($0)) } ?? .null }

    /// `0600`, or `-` for a missing file.
    static func mode(_ mode: Int?) -> String {
        guard let mode else { return "-" }
        let octal = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - octal.count)) + octal
    }

    static func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }

    /// A service as the text output shows it: `(default)` for the one an item gets without
    /// `--service` (stored under the name `auth0` whatever the app is, so `auth0` would read as
    /// Auth0's), else its name. JSON keeps the stored name.
    static func service(_ service: String) -> String {
        service == AccountID.defaultService ? defaultServiceLabel : service
    }

    /// How text output shows ``AccountID/defaultService``.
    static let defaultServiceLabel = "(default)"

    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }

    /// A schema migration as `status` and `migrate` show it in JSON.
    static func migration(_ migration: StoreInspection.MigrationInfo) -> JSONValue {
        ["version": .int(migration.version), "name": .string(migration.name)]
    }
}
