import Foundation
import Testing
import TestSupport
import TestTraits

@testable import AuthSession

/// Catalogue `backoff_property`: 10^5 sampled retry delays.
///
/// - a backoff before retry n lies in `[0, min(cap, base·2ⁿ)]` (checked against an
///   independent computation in Double);
/// - with a server delay under the cap and the budget, the wait is at least that delay;
///   above either, the policy gives up with `retryAfter` capped;
/// - a run of failures ends within `maximumAttempts` attempts and `maximumTotalTime`.
///
/// Prints `METRIC backoff_property samples=… violations=… SEED=…`; set `SEED` to replay.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct BackoffPropertyTests {
    static func seconds(_ duration: Duration) -> Double {
        let (s, atto) = duration.components
        return Double(s) + Double(atto) / 1e18
    }

    @Test func backoffProperty() {
        let seed = ProcessInfo.processInfo.environment["SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
        // One generator picks the scenarios; the policy gets its own seeded source.
        var scenario = SeededGenerator(seed: seed)
        let jitter = RandomSource.seeded(seed ^ 0xA5A5_A5A5_5A5A_5A5A)
        let samples = 100_000
        var violations = 0
        var firstViolation: String?
        var belowHalf = 0  // full jitter: about half the draws fall below half the ceiling
        var jitterSamples = 0
        func violation(_ text: @autoclosure () -> String) {
            violations += 1
            if firstViolation == nil { firstViolation = text() }
        }

        for _ in 0..<samples {
            let baseMs = Int64.random(in: 1...2_000, using: &scenario)
            let capMs = Int64.random(in: 1...120_000, using: &scenario)
            let retryAfterCapS = Int64.random(in: 0...300, using: &scenario)
            let attempts = Int.random(in: 1...12, using: &scenario)
            let totalS = Int64.random(in: 0...600, using: &scenario)
            let policy = RetryPolicy(
                maximumAttempts: attempts, baseDelay: .milliseconds(baseMs), maximumDelay: .milliseconds(capMs),
                maximumRetryAfter: .seconds(retryAfterCapS), maximumTotalTime: .seconds(totalS), random: jitter)
            let kind = Int.random(in: 0..<10, using: &scenario)

            if kind < 7 {
                // A plain backoff draw.
                let n = Int.random(in: 0...70, using: &scenario)
                let ceiling = min(Double(capMs) / 1000, Double(baseMs) / 1000 * pow(2, Double(n)))
                let delay = Self.seconds(policy.backoffDelay(retry: n))
                if !(delay >= 0 && delay <= ceiling + 1e-9) {
                    violation("backoff n=\(n) base=\(baseMs)ms cap=\(capMs)ms ⇒ \(delay)s > \(ceiling)s")
                }
                if ceiling > 0 {
                    jitterSamples += 1
                    if delay < ceiling / 2 { belowHalf += 1 }
                }
            } else if kind < 9 {
                // A decision with a server delay.
                let attempt = Int.random(in: 1...attempts, using: &scenario)
                let askedMs = Int64.random(in: 0...400_000, using: &scenario)
                let elapsedMs = Int64.random(in: 0...(totalS * 1000 + 1), using: &scenario)
                let asked = Duration.milliseconds(askedMs)
                let decision = policy.decision(
                    afterAttempt: attempt, serverDelay: asked, elapsed: .milliseconds(elapsedMs))
                let remainingMs = totalS * 1000 - elapsedMs
                let cappedMs = min(askedMs, retryAfterCapS * 1000)
                let fits = attempt < attempts && askedMs <= retryAfterCapS * 1000 && askedMs <= remainingMs
                switch decision {
                case .retry(let after):
                    if !fits { violation("retried although asked=\(askedMs)ms cap=\(retryAfterCapS)s remaining=\(remainingMs)ms") }
                    if after < asked { violation("waited \(after) < asked \(asked)") }
                    if Self.seconds(after) * 1000 > Double(remainingMs) + 1e-6 { violation("waited past the budget") }
                case .giveUp(let retryAfter):
                    if fits { violation("gave up although asked=\(askedMs)ms fits") }
                    if retryAfter != .milliseconds(cappedMs) {
                        violation("gave up reporting \(String(describing: retryAfter)), expected \(cappedMs)ms")
                    }
                }
            } else {
                // A whole run of retryable failures, with or without server delays.
                var attempt = 0
                var elapsed = Duration.zero
                var done = false
                while !done {
                    attempt += 1
                    if attempt > attempts { break }
                    let asked: Duration? =
                        Bool.random(using: &scenario) ? .milliseconds(Int64.random(in: 0...90_000, using: &scenario)) : nil
                    switch policy.decision(afterAttempt: attempt, serverDelay: asked, elapsed: elapsed) {
                    case .retry(let after): elapsed += after
                    case .giveUp: done = true
                    }
                }
                if !done || attempt > attempts { violation("run exceeded \(attempts) attempts") }
                if elapsed > .seconds(totalS) { violation("run waited \(elapsed) > \(totalS)s") }
            }
        }

        let fraction = Double(belowHalf) / Double(max(1, jitterSamples))
        if jitterSamples > 10_000 && !(0.47...0.53).contains(fraction) {
            violation("jitter is not uniform: \(fraction) of draws below half the ceiling")
        }
        print("METRIC backoff_property samples=\(samples) violations=\(violations) SEED=\(seed)")
        #expect(violations == 0, "first violation: \(firstViolation ?? "-") (SEED=\(seed))")
    }

    @Test func ceilingDoublesUpToTheCap() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maximumDelay: .seconds(1))
        #expect(policy.backoffCeiling(retry: 0) == .milliseconds(100))
        #expect(policy.backoffCeiling(retry: 1) == .milliseconds(200))
        #expect(policy.backoffCeiling(retry: 3) == .milliseconds(800))
        #expect(policy.backoffCeiling(retry: 4) == .seconds(1))
        #expect(policy.backoffCeiling(retry: 500) == .seconds(1))
    }

    @Test func seededSourceIsReproducible() {
        let a = RandomSource.seeded(42)
        let b = RandomSource.seeded(42)
        let c = RandomSource.seeded(43)
        let first = (0..<8).map { _ in a.nextUnit() }
        #expect(first == (0..<8).map { _ in b.nextUnit() })
        #expect(first != (0..<8).map { _ in c.nextUnit() })
        #expect(first.allSatisfy { $0 >= 0 && $0 < 1 })
    }
}

