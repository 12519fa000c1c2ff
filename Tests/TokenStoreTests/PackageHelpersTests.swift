import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// The package's shared helpers, through `package` access only (no `@testable`): the one
/// constant-time comparison and the one set of `Duration` conversions.
@Suite("Package helpers", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PackageHelpersTests {
    @Test("ConstantTime.equal: same bytes, a difference anywhere, another length, empty")
    func constantTimeEqual() {
        let value: [UInt8] = Array(0..<40)
        #expect(ConstantTime.equal(value, value))
        for index in [0, 19, 39] {
            var other = value
            other[index] ^= 0x01
            #expect(!ConstantTime.equal(value, other), "a difference at byte \(index)")
        }
        #expect(!ConstantTime.equal(value, Array(value.dropLast())))
        #expect(!ConstantTime.equal([], [0]))
        #expect(ConstantTime.equal([], []))
        #expect(SecretBytes(value) == SecretBytes(value))
        #expect(SecretBytes(value) != SecretBytes(Array(value.reversed())))
        #expect(SecretBytes([UInt8]()) == SecretBytes([UInt8]()))
    }

    @Test("Duration conversions saturate instead of trapping")
    func durationConversions() {
        #expect(Duration.milliseconds(1_500).wholeMilliseconds == 1_500)
        #expect((Duration.seconds(2) + .nanoseconds(999_999)).wholeMilliseconds == 2_000)
        #expect(Duration.seconds(-1).wholeMilliseconds == 0)
        #expect(Duration.seconds(Int64.max).wholeMilliseconds == .max)
        #expect(Duration.milliseconds(1_500).roundedUpMilliseconds == 1_500)
        #expect(Duration.microseconds(1_001).roundedUpMilliseconds == 2)
        #expect(Duration.seconds(-1).roundedUpMilliseconds == 0)
        #expect(Duration.seconds(Int64.max).roundedUpMilliseconds == .max)
        #expect(Duration.microseconds(3).wholeNanoseconds == 3_000)
        #expect(Duration.seconds(-2).wholeNanoseconds == -2_000_000_000)
        #expect(Duration.seconds(Int64.max).wholeNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeNanoseconds == .min)
        #expect(Duration.milliseconds(2_250).timeInterval == 2.25)
        #expect(Duration.seconds(-3).timeInterval == -3)
        #expect(Duration.milliseconds(5).dispatchInterval == .nanoseconds(5_000_000))
        #expect(Duration.seconds(-5).dispatchInterval == .nanoseconds(0))
        #expect(Duration.seconds(Int64.max).dispatchInterval == .never)
    }
}
