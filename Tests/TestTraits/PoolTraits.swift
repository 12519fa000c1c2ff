import TestSupport
import Testing

/// Where a suite's tests run. Every suite and free test names one of the two
/// (TestSuiteHygieneTests checks it):
///
/// - `.offPool`: each test runs through `offPool` (Tests/TestSupport/OffPool.swift), on the test
///   suite's own threads, never a cooperative one. How many run at once is bounded twice:
///   at most `OffPoolWidth.suites` top-level suites (or free tests) are under way at once, a
///   place taken before the suite starts — outside any test's time limit, so a suite waiting
///   its turn costs none of its tests' minutes — and within them at most `OffPoolWidth.tests`
///   tests run at once (a test waits for a place only behind tests of the few suites under way).
/// - `.cooperativePool`: the test runs on the cooperative pool as Swift Testing runs it; only
///   for tests about the pool itself (`BlockingExecutorTests` checks that a caller waiting on
///   the package's executor leaves the pool free, which a probe run off the pool would not see).
public struct PoolTrait: TestTrait, SuiteTrait, TestScoping {
    public let offPool: Bool
    public var isRecursive: Bool { true }

    /// Set inside a top-level suite's (or free test's) place: nested suites take none of their own.
    @TaskLocal static var inSuitePlace = false
    /// Set while a test runs off the pool, so a nested suite's trait does not take a second place.
    @TaskLocal static var inside = false

    /// Whether the running code is inside a suite's place / a test's place (TestSuiteHygieneTests).
    public static var isInSuitePlace: Bool { inSuitePlace }
    public static var isInTestPlace: Bool { inside }

    /// Scope for a suite or a test function as a whole (`testCase` nil: Swift Testing asks this
    /// outside the time limit; its default gives a recursive suite trait no suite scope), and
    /// for each test case (inside the time limit).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? { offPool ? self : (testCase == nil ? nil : self) }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard offPool else { return try await function() }
        if testCase == nil {
            guard !Self.inSuitePlace else { return try await function() }
            try await OffPoolWidth.suites.holding { try await Self.$inSuitePlace.withValue(true) { try await function() } }
            return
        }
        guard !Self.inside else { return try await function() }
        try await OffPoolWidth.tests.holding {
            try await Self.$inside.withValue(true) { try await TestSupport.offPool { try await function() } }
        }
    }
}

extension Trait where Self == PoolTrait {
    /// The test's body on the test suite's own threads (see `PoolTrait`).
    public static var offPool: Self { PoolTrait(offPool: true) }
    /// The test on the cooperative pool: tests about the pool itself (see `PoolTrait`).
    public static var cooperativePool: Self { PoolTrait(offPool: false) }
}
