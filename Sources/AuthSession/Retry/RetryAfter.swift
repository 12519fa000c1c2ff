import FoundationEssentials

/// Parsing of the server's "wait this long" headers: `Retry-After` (RFC 9110 §10.2.3, as
/// delta-seconds or as an HTTP-date in any of the three formats of §5.6.7) and Auth0's
/// `X-RateLimit-Reset` (epoch seconds).
///
/// The parsers return the raw delay the server asked for (never negative: a date in the past
/// is zero); capping is the ``RetryPolicy``'s job. Anything malformed is `nil`, never a crash.
package enum RetryAfter {
    /// Upper bound on any parsed delay (100 years), so arithmetic never overflows.
    package static let ceiling: Duration = .seconds(3_155_760_000)

    /// The delay asked by `headers`: `Retry-After` when present and valid, otherwise (when
    /// `rateLimitReset` is true, as for a 429) `X-RateLimit-Reset`, otherwise `nil`.
    ///
    /// Auth0 sends `X-RateLimit-*` on every answer, so the reset epoch means "wait" only on a 429.
    package static func serverDelay(in headers: HTTPHeaders, now: Date, rateLimitReset: Bool = true) -> Duration? {
        if let value = headers["Retry-After"], let delay = parse(value, now: now) { return delay }
        if rateLimitReset, let value = headers["X-RateLimit-Reset"], let delay = parseRateLimitReset(value, now: now) {
            return delay
        }
        return nil
    }

    /// Parses a `Retry-After` value: `120`, `Sun, 06 Nov 1994 08:49:37 GMT`,
    /// `Sunday, 06-Nov-94 08:49:37 GMT` or `Sun Nov  6 08:49:37 1994`.
    /// - Returns: the delay from `now` (zero for a past date), or `nil` when malformed.
    package static func parse(_ value: String, now: Date) -> Duration? {
        let bytes = Array(trimmed(value.utf8))
        guard !bytes.isEmpty, bytes.count <= 64 else { return nil }
        if bytes.allSatisfy(isDigit) { return deltaSeconds(bytes) }
        guard let date = parseHTTPDate(bytes) else { return nil }
        return delay(until: date, now: now)
    }

    /// Parses `X-RateLimit-Reset` (the epoch second at which the limit resets).
    /// - Returns: the delay from `now` (zero for a past instant), or `nil` when malformed.
    package static func parseRateLimitReset(_ value: String, now: Date) -> Duration? {
        let bytes = Array(trimmed(value.utf8))
        guard !bytes.isEmpty, bytes.count <= 20, bytes.allSatisfy(isDigit), let epoch = Int64(String(decoding: bytes, as: UTF8.self))
        else { return nil }
        return delay(until: epoch, now: now)
    }

    /// Parses an HTTP-date in any of the three RFC 9110 formats into epoch seconds.
    package static func parseHTTPDate(_ value: String) -> Int64? {
        parseHTTPDate(Array(trimmed(value.utf8)))
    }

    // MARK: - Implementation

    private static func deltaSeconds(_ digits: [UInt8]) -> Duration {
        // Leading zeros are fine; more than 10 significant digits is beyond the ceiling anyway.
        let significant = digits.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 10, let seconds = Int64(String(decoding: significant.isEmpty ? [UInt8(ascii: "0")] : Array(significant), as: UTF8.self))
        else { return ceiling }
        return min(.seconds(seconds), ceiling)
    }

    private static func delay(until epoch: Int64, now: Date) -> Duration {
        let nowSeconds = now.timeIntervalSince1970
        let difference = Double(epoch) - nowSeconds
        if !(difference > 0) { return .zero }
        if difference >= 3_155_760_000 { return ceiling }
        return .milliseconds(Int64((difference * 1000).rounded(.up)))
    }

    private static let dayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func parseHTTPDate(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count <= 64 else { return nil }
        var scanner = ByteScanner(bytes)
        guard let day = scanner.letters() else { return nil }
        if scanner.consume(UInt8(ascii: ",")) {
            if dayNames.contains(day) {
                // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
                guard scanner.consume(UInt8(ascii: " ")), let dd = scanner.digits(exactly: 2),
                    scanner.consume(UInt8(ascii: " ")), let monthText = scanner.letters(),
                    let month = monthNames.firstIndex(of: monthText), scanner.consume(UInt8(ascii: " ")),
                    let year = scanner.digits(exactly: 4), scanner.consume(UInt8(ascii: " ")),
                    let time = scanner.time(), scanner.consume(UInt8(ascii: " ")),
                    scanner.letters() == "GMT", scanner.atEnd
                else { return nil }
                return epoch(year: year, month: month + 1, day: dd, time: time)
            }
            if longDayNames.contains(day) {
                // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
                guard scanner.consume(UInt8(ascii: " ")), let dd = scanner.digits(exactly: 2),
                    scanner.consume(UInt8(ascii: "-")), let monthText = scanner.letters(),
                    let month = monthNames.firstIndex(of: monthText), scanner.consume(UInt8(ascii: "-")),
                    let yy = scanner.digits(exactly: 2), scanner.consume(UInt8(ascii: " ")),
                    let time = scanner.time(), scanner.consume(UInt8(ascii: " ")),
                    scanner.letters() == "GMT", scanner.atEnd
                else { return nil }
                return epoch(year: fullYear(twoDigit: yy), month: month + 1, day: dd, time: time)
            }
            return nil
        }
        // asctime: Sun Nov  6 08:49:37 1994
        guard dayNames.contains(day), scanner.consume(UInt8(ascii: " ")), let monthText = scanner.letters(),
            let month = monthNames.firstIndex(of: monthText), scanner.consume(UInt8(ascii: " "))
        else { return nil }
        let dd: Int
        if scanner.consume(UInt8(ascii: " ")) {
            guard let single = scanner.digits(exactly: 1) else { return nil }
            dd = single
        } else {
            guard let double = scanner.digits(exactly: 2) else { return nil }
            dd = double
        }
        guard scanner.consume(UInt8(ascii: " ")), let time = scanner.time(), scanner.consume(UInt8(ascii: " ")),
            let year = scanner.digits(exactly: 4), scanner.atEnd
        else { return nil }
        return epoch(year: year, month: month + 1, day: dd, time: time)
    }

    /// RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
    private static func fullYear(twoDigit yy: Int) -> Int {
        let currentYear = Calendar(identifier: .gregorian).component(.year, from: Date())
        var year = (currentYear / 100) * 100 + yy
        if year > currentYear + 50 { year -= 100 }
        return year
    }

    private static func epoch(year: Int, month: Int, day: Int, time: (Int, Int, Int)) -> Int64? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            (0...23).contains(time.0), (0...59).contains(time.1), (0...60).contains(time.2)
        else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * 86_400
            + Int64(time.0 * 3600 + time.1 * 60 + time.2)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func trimmed<C: Collection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        var slice = bytes[...]
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.reversed().first, isSpace(last) { slice = slice.dropLast() }
        return slice
    }

    /// A cursor over ASCII bytes.
    private struct ByteScanner {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func letters() -> String? {
            let start = index
            while index < bytes.count, (bytes[index] | 0x20) >= UInt8(ascii: "a"), (bytes[index] | 0x20) <= UInt8(ascii: "z") {
                index += 1
            }
            return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
        }

        mutating func digits(exactly count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for offset in 0..<count {
                let byte = bytes[index + offset]
                guard isDigit(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        mutating func time() -> (Int, Int, Int)? {
            guard let hours = digits(exactly: 2), consume(UInt8(ascii: ":")), let minutes = digits(exactly: 2),
                consume(UInt8(ascii: ":")), let seconds = digits(exactly: 2)
            else { return nil }
            return (hours, minutes, seconds)
        }
    }
}
