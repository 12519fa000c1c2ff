import FoundationEssentials

/// A small value-type logger in the shape of swift-log's `Logger`, passed in by the app.
///
/// Libraries log at `info` or below and never configure anything global. Messages are
/// `@autoclosure`s, built only when the level is enabled. Metadata values must never be a
/// secret, an account name or a user id: log counts, codes, fingerprints and durations.
///
/// ```swift
/// var logger = TokenStoreLogger(label: "my-app.tokens", level: .debug) { record in print(record) }
/// let store = try TokenStore(appID: "com.example.app", logger: logger)
/// ```
public struct TokenStoreLogger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    /// One log event, handed to the handler.
    public struct Record: Sendable, CustomStringConvertible {
        public let label: String
        public let level: Level
        public let message: String
        public let metadata: [String: String]
        public var description: String {
            let meta = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "[\(label)] \(level): \(message)" + (meta.isEmpty ? "" : " " + meta.joined(separator: " "))
        }
    }

    public let label: String
    public var level: Level
    public var metadata: [String: String]
    private let handler: @Sendable (Record) -> Void

    /// A logger that sends records at `level` and above to `handler`.
    public init(
        label: String, level: Level = .info, metadata: [String: String] = [:],
        handler: @escaping @Sendable (Record) -> Void
    ) {
        self.label = label
        self.level = level
        self.metadata = metadata
        self.handler = handler
    }

    /// A logger that drops everything (the default for library objects).
    public static let disabled = TokenStoreLogger(label: "disabled", level: .critical) { _ in }

    /// A logger that writes one line per record to standard error.
    public static func standardError(label: String, level: Level = .info) -> TokenStoreLogger {
        TokenStoreLogger(label: label, level: level) { record in
            POSIXFile.writeAll(2, Array((record.description + "\n").utf8))
        }
    }

    public func log(
        _ level: Level, _ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]
    ) {
        guard level >= self.level else { return }
        var merged = self.metadata
        for (key, value) in metadata() { merged[key] = value }
        handler(Record(label: label, level: level, message: message(), metadata: merged))
    }

    public func trace(_ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]) {
        log(.trace, message(), metadata: metadata())
    }
    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]) {
        log(.debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]) {
        log(.info, message(), metadata: metadata())
    }
    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]) {
        log(.warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> [String: String] = [:]) {
        log(.error, message(), metadata: metadata())
    }
}
