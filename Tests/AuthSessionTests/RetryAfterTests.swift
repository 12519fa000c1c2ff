import Foundation
import TestSupport
import TestTraits
import Testing

@testable import AuthSession

/// `Retry-After` (delta-seconds and the three RFC 9110 HTTP-date formats) and Auth0's
/// `X-RateLimit-Reset`, parsed and capped.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct RetryAfterTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT — the RFC's own example instant.
    static let rfcExample = Date(timeIntervalSince1970: 784_111_777)

    static func posixFormatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    @Test(arguments: [
        ("120", Duration.seconds(120)), ("0", .zero), ("1", .seconds(1)), ("007", .seconds(7)),
        ("  30  ", .seconds(30)), ("\t5", .seconds(5)), ("86400", .seconds(86_400)),
    ])
    func deltaSeconds(value: String, expected: Duration) {
        #expect(RetryAfter.parse(value, now: Self.rfcExample) == expected)
    }

    @Test func imfFixdate() {
        #expect(RetryAfter.parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:50:37 GMT", now: Self.rfcExample) == .seconds(60))
    }

    @Test func obsoleteRFC850() {
        #expect(RetryAfter.parseHTTPDate("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:51:37 GMT", now: Self.rfcExample) == .seconds(120))
    }

    @Test func asctime() {
        #expect(RetryAfter.parseHTTPDate("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(RetryAfter.parseHTTPDate("Thu Nov 16 08:49:37 1994") == Int64(784_111_777 + 10 * 86_400))
        #expect(RetryAfter.parse("Sun Nov  6 08:49:47 1994", now: Self.rfcExample) == .seconds(10))
    }

    /// The three formats of a date 90 s ahead of the real clock, written by Foundation's
    /// formatter (an independent oracle), parse to about 90 s.
    @Test(arguments: ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"])
    func formatsAgainstFoundation(format: String) throws {
        let now = Date()
        let target = now.addingTimeInterval(90)
        var text = Self.posixFormatter(format).string(from: target)
        if format.hasPrefix("EEE MMM d ") {
            // asctime pads a one-digit day with a space: "Sun Nov  6 …".
            let parts = text.split(separator: " ", omittingEmptySubsequences: false)
            if parts[2].count == 1 { text = "\(parts[0]) \(parts[1])  \(parts[2]) \(parts[3]) \(parts[4])" }
        }
        let delay = try #require(RetryAfter.parse(text, now: now), "could not parse \(text)")
        #expect(delay >= .seconds(88) && delay <= .seconds(91), "\(text) ⇒ \(delay)")
    }

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:36 GMT", "Sunday, 06-Nov-94 08:00:00 GMT", "Sun Nov  6 00:00:00 1994",
        "Thu, 01 Jan 1970 00:00:00 GMT",
    ])
    func pastDateIsZero(value: String) {
        #expect(RetryAfter.parse(value, now: Self.rfcExample) == .zero)
    }

    @Test(arguments: [
        "", "   ", "soon", "-5", "-0", "+5", "1.5", "1e3", "5 s", "0x10", "١٢", "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 PST", "sun, 06 nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 29 Feb 1994 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 1994 GMT", "Sun, 06 Nov 1994 08:49:37 GMT extra",
        "Funday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", String(repeating: "9", count: 100),
    ])
    func garbageIsNil(value: String) {
        #expect(RetryAfter.parse(value, now: Self.rfcExample) == nil, "\(value)")
    }

    @Test func leapDayIsValid() {
        #expect(RetryAfter.parseHTTPDate("Thu, 29 Feb 1996 00:00:00 GMT") == 825_552_000)
    }

    @Test func hugeIsCappedByThePolicy() {
        let policy = RetryPolicy(maximumRetryAfter: .seconds(60))
        for value in ["99999999999999999999", "4294967296", "31536000", "Fri, 31 Dec 9999 23:59:59 GMT"] {
            let raw = RetryAfter.parse(value, now: Self.rfcExample)
            #expect(raw != nil && raw! > .seconds(60), "\(value)")
            #expect(raw! <= RetryAfter.ceiling)
            #expect(policy.capped(serverDelay: raw!) == .seconds(60))
            // Too long to wait within the call: give up at once, reporting the capped delay.
            #expect(
                policy.decision(afterAttempt: 1, serverDelay: raw, elapsed: .zero) == .giveUp(retryAfter: .seconds(60)))
        }
    }

    @Test func rateLimitReset() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryAfter.parseRateLimitReset("1700000030", now: now) == .seconds(30))
        #expect(RetryAfter.parseRateLimitReset(" 1700000001 ", now: now) == .seconds(1))
        #expect(RetryAfter.parseRateLimitReset("1699999000", now: now) == .zero)
        #expect(RetryAfter.parseRateLimitReset("soon", now: now) == nil)
        #expect(RetryAfter.parseRateLimitReset("-1", now: now) == nil)
        #expect(RetryAfter.parseRateLimitReset("", now: now) == nil)
        #expect(RetryAfter.parseRateLimitReset(String(repeating: "9", count: 30), now: now) == nil)
    }

    @Test func headerPrecedence() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        // Retry-After wins over X-RateLimit-Reset; names are case-insensitive.
        #expect(RetryAfter.serverDelay(in: ["retry-after": "3", "X-RateLimit-Reset": "1700000030"], now: now) == .seconds(3))
        // No Retry-After: the reset epoch is used.
        #expect(RetryAfter.serverDelay(in: ["x-ratelimit-reset": "1700000030"], now: now) == .seconds(30))
        // A garbage Retry-After is ignored, so the reset epoch is used.
        #expect(RetryAfter.serverDelay(in: ["Retry-After": "later", "X-RateLimit-Reset": "1700000010"], now: now) == .seconds(10))
        #expect(RetryAfter.serverDelay(in: ["Retry-After": "later"], now: now) == nil)
        #expect(RetryAfter.serverDelay(in: [:], now: now) == nil)
    }

    /// Random bytes never crash the parsers (a smoke version of the fuzz target).
    @Test func randomInputNeverCrashes() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789 ,:-SunMonNovGMTday\t\u{0}é".unicodeScalars)
        var parsed = 0
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...40, using: &generator)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet.randomElement(using: &generator)!) }
            let value = String(text)
            if let delay = RetryAfter.parse(value, now: Self.rfcExample) {
                parsed += 1
                #expect(delay >= .zero && delay <= RetryAfter.ceiling)
            }
            _ = RetryAfter.parseRateLimitReset(value, now: Self.rfcExample)
        }
        #expect(parsed < 20_000)
    }
}
