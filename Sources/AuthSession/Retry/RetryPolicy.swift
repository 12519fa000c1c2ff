import FoundationEssentials
import TokenStore

/// When and how often a call to the authorization server is tried again.
///
/// - Exponential backoff with full jitter: the delay before retry `n` (0 for the first
///   retry) is uniform in `[0, min(maximumDelay, baseDelay·2ⁿ)]`.
/// - The server's own delay (`Retry-After`, seconds or HTTP-date; else Auth0's
///   `X-RateLimit-Reset`) replaces the backoff when given. When it exceeds
///   ``maximumRetryAfter`` or the time left in ``maximumTotalTime``, the policy gives up
///   at once and the error carries the (capped) delay as `retryAfter`, rather than sleeping
///   past the budget.
/// - At most ``maximumAttempts`` attempts in all, at most ``maximumTotalTime`` spent waiting.
/// - Cancellable: task cancellation interrupts the wait.
///
/// ```swift
/// let policy = RetryPolicy(maximumAttempts: 3, baseDelay: .milliseconds(200))
/// let client = AuthorizationServerClient(configuration: configuration, retryPolicy: policy)
/// ```
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included (1 means no retry).
    public var maximumAttempts: Int
    /// The backoff before the first retry is drawn from `[0, baseDelay]`.
    public var baseDelay: Duration
    /// The cap of the exponential backoff.
    public var maximumDelay: Duration
    /// The longest server-asked delay (`Retry-After`) the policy waits for in a call, and the
    /// cap of the `retryAfter` an error reports.
    public var maximumRetryAfter: Duration
    /// The most time one call may spend, attempts and waits included.
    public var maximumTotalTime: Duration
    /// The randomness of the jitter.
    package var random: RandomSource
    /// The clocks and the sleep (injectable for tests).
    package var clock: RetryClock

    /// A policy. The defaults suit an interactive app: 4 attempts, 0.5 s base, 8 s cap,
    /// a server delay of up to 60 s honoured, 60 s in all.
    public init(
        maximumAttempts: Int = 4, baseDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(8),
        maximumRetryAfter: Duration = .seconds(60), maximumTotalTime: Duration = .seconds(60)
    ) {
        self.init(
            maximumAttempts: maximumAttempts, baseDelay: baseDelay, maximumDelay: maximumDelay,
            maximumRetryAfter: maximumRetryAfter, maximumTotalTime: maximumTotalTime, random: .system, clock: .system)
    }

    /// A policy with injected randomness and clocks (tests).
    package init(
        maximumAttempts: Int = 4, baseDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(8),
        maximumRetryAfter: Duration = .seconds(60), maximumTotalTime: Duration = .seconds(60),
        random: RandomSource, clock: RetryClock = .system
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = max(.zero, baseDelay)
        self.maximumDelay = max(.zero, maximumDelay)
        self.maximumRetryAfter = max(.zero, maximumRetryAfter)
        self.maximumTotalTime = max(.zero, maximumTotalTime)
        self.random = random
        self.clock = clock
    }

    /// The default policy.
    public static let `default` = RetryPolicy()

    /// One attempt, no retry (server delays still capped and reported).
    public static let none = RetryPolicy(maximumAttempts: 1)

    /// `min(maximumDelay, baseDelay·2ⁿ)`: the upper bound of the backoff before retry `n`
    /// (0 for the first retry).
    package func backoffCeiling(retry n: Int) -> Duration {
        let cap = maximumDelay.wholeNanoseconds
        let base = baseDelay.wholeNanoseconds
        guard base > 0 else { return .zero }
        let shift = max(0, n)
        guard shift < 63 else { return .nanoseconds(cap) }
        let (scaled, overflow) = base.multipliedReportingOverflow(by: Int64(1) << shift)
        return .nanoseconds(overflow ? cap : min(cap, scaled))
    }

    /// A full-jitter backoff before retry `n`: uniform in `[0, backoffCeiling(retry: n)]`.
    package func backoffDelay(retry n: Int) -> Duration {
        let ceiling = backoffCeiling(retry: n).wholeNanoseconds
        let unit = random.nextUnit()
        let drawn = Int64((Double(ceiling) * unit).rounded(.down))
        return .nanoseconds(min(max(0, drawn), ceiling))
    }

    /// The server's delay capped at ``maximumRetryAfter``.
    package func capped(serverDelay: Duration) -> Duration {
        min(max(.zero, serverDelay), maximumRetryAfter)
    }

    /// What to do after attempt number `attempt` (1-based) failed in a retryable way.
    ///
    /// - Parameters:
    ///   - serverDelay: the delay the server asked for (raw, uncapped), if any.
    ///   - elapsed: the time spent in this call so far.
    package func decision(afterAttempt attempt: Int, serverDelay: Duration?, elapsed: Duration) -> RetryDecision {
        let reported = serverDelay.map(capped(serverDelay:))
        guard attempt < maximumAttempts else { return .giveUp(retryAfter: reported) }
        let remaining = maximumTotalTime - elapsed
        let delay: Duration
        if let serverDelay {
            guard serverDelay <= maximumRetryAfter else { return .giveUp(retryAfter: reported) }
            delay = serverDelay
        } else {
            delay = backoffDelay(retry: attempt - 1)
        }
        guard delay <= remaining else { return .giveUp(retryAfter: reported) }
        return .retry(after: delay)
    }
}

/// The outcome of ``RetryPolicy/decision(afterAttempt:serverDelay:elapsed:)``.
package enum RetryDecision: Sendable, Equatable {
    /// Wait this long, then try again.
    case retry(after: Duration)
    /// Stop; report `retryAfter` (capped) when the server asked for a delay.
    case giveUp(retryAfter: Duration?)
}

/// A source of uniform random numbers for the jitter.
package struct RandomSource: Sendable {
    private let next: @Sendable () -> UInt64

    /// Random numbers from `next` (64 uniformly random bits per call).
    package init(_ next: @escaping @Sendable () -> UInt64) { self.next = next }

    /// The system's cryptographic generator.
    package static let system = RandomSource {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// A reproducible sequence (SplitMix64) from `seed`, for tests: print the seed.
    package static func seeded(_ seed: UInt64) -> RandomSource {
        let state = SplitMix64(seed: seed)
        return RandomSource { state.next() }
    }

    /// A uniform `Double` in `[0, 1)`.
    package func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }
}

/// SplitMix64 behind a lock.
private final class SplitMix64: Sendable {
    private let state: Locked<UInt64>

    init(seed: UInt64) { state = Locked(seed) }

    func next() -> UInt64 {
        state.withLock { state in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}

/// The time sources and the sleep a ``RetryPolicy`` uses.
package struct RetryClock: Sendable {
    /// Monotonic time since an arbitrary origin (measures the total-time budget).
    package var now: @Sendable () -> Duration
    /// Wall-clock time (turns an HTTP-date or an epoch second into a delay).
    package var wallClock: @Sendable () -> Date
    /// Waits for the given time; throws `CancellationError` when the task is cancelled.
    package var sleep: @Sendable (Duration) async throws -> Void

    /// A clock from its three parts.
    package init(
        now: @escaping @Sendable () -> Duration, wallClock: @escaping @Sendable () -> Date,
        sleep: @escaping @Sendable (Duration) async throws -> Void
    ) {
        self.now = now
        self.wallClock = wallClock
        self.sleep = sleep
    }

    private static let origin = ContinuousClock.now

    /// The real clocks: `ContinuousClock`, `Date()`, `Task.sleep`.
    package static let system = RetryClock(
        now: { RetryClock.origin.duration(to: ContinuousClock.now) },
        wallClock: { Date() },
        sleep: { duration in try await Task.sleep(for: duration) })
}
