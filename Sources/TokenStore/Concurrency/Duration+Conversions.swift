import Dispatch

/// The package's one set of `Duration` conversions: to the integer units of C and system
/// calls (saturating, never trapping), to `TimeInterval` for date arithmetic, and to
/// `DispatchTimeInterval` for semaphore waits.
extension Duration {
    /// Whole nanoseconds, saturating at `Int64.min` / `Int64.max` (signed: a backoff's sums).
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, sumOverflow) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return sumOverflow ? .max : sum
    }

    /// Whole milliseconds, saturating (a negative duration is 0): for C timeouts and messages.
    package var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000)
        return overflow ? .max : product.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).partialValue
    }

    /// Milliseconds rounded up, saturating (a negative duration is 0): for `poll` and libcurl
    /// timeouts, which must not end before the duration has passed.
    package var roundedUpMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000)
        let part = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return overflow ? .max : product.addingReportingOverflow(part).partialValue
    }

    /// Seconds as a `TimeInterval`, for arithmetic with `Date`.
    package var timeInterval: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The same span for `DispatchSemaphore.wait(timeout:)`: a negative one is 0, one beyond
    /// `Int` nanoseconds is `.never`.
    package var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow || seconds < 0 { return seconds < 0 ? .nanoseconds(0) : .never }
        let total = nanos.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000)
        return total.overflow ? .never : .nanoseconds(Int(clamping: total.partialValue))
    }
}
