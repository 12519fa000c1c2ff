import Foundation

/// A fresh directory under the system temporary directory, removed when the value is deallocated.
public final class TemporaryDirectory: @unchecked Sendable {  // immutable after init
    public let url: URL
    public var path: String { url.path }

    public init(prefix: String = "tokenstore-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory(), isDirectory: true)
        url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public func appending(_ component: String) -> URL { url.appendingPathComponent(component) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// The repository's root folder, found from this source file's location.
public let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The time limit of every test suite, in minutes (`@Suite(…, .timeLimit(.minutes(TestTimeLimit.minutes)))`).
///
/// A hang becomes a failure that names the test instead of a silent stall: a detector of hangs,
/// not a speed goal (speed is shown by `make bench`). The limit counts a test's wait for a place
/// among the tests under way (`OffPoolWidth.tests`) as well as its run, and on CI's 2-core machine
/// a one-line test waited 9 minutes of a ThreadSanitizer pass (the slowest CI-size test runs about
/// 4 minutes there), so 10 minutes failed tests for being slow: 20. Soak sizes
/// (`TOKENSTORE_SOAK=1`, `make soak`) run for hours and get 4 hours.
public enum TestTimeLimit {
    public static var minutes: Int { ProcessInfo.processInfo.environment["TOKENSTORE_SOAK"] == "1" ? 240 : 20 }
}
