import FoundationEssentials
import TokenStore

/// Shows `label: done/total` on one rewritten stderr line while a long command runs,
/// only when stderr is a terminal and `--quiet` is not given; silent otherwise.
///
/// ```swift
/// let progress = ProgressReporter(label: "verify", console: console, quiet: global.quiet)
/// for (index, row) in rows.enumerated() { ...; progress.update(done: index + 1, total: rows.count) }
/// progress.finish()
/// ```
/// Thread-safe, so it can be captured by a `@Sendable` progress callback.
final class ProgressReporter: @unchecked Sendable {  // mutable state guarded by `lock`
    private let label: String
    private let console: Console
    private let isEnabled: Bool
    private let minimumInterval: TimeInterval
    private let lock = Locked(())
    private var lastWidth = 0
    private var lastWrite = Date.distantPast

    /// - Parameter minimumInterval: the shortest time between two redraws; the final count is always drawn.
    init(label: String, console: Console, quiet: Bool, minimumInterval: TimeInterval = 0.1) {
        self.label = label
        self.console = console
        self.isEnabled = console.standardErrorIsTerminal && !quiet
        self.minimumInterval = minimumInterval
    }

    /// Redraws the line with the new counts (throttled).
    func update(done: Int, total: Int) {
        guard isEnabled else { return }
        lock.withLock { _ in
            let now = Date()
            guard done >= total || now.timeIntervalSince(lastWrite) >= minimumInterval else { return }
            lastWrite = now
            let text = "\(label): \(done)/\(total)"
            let padding = String(repeating: " ", count: max(0, lastWidth - text.count))
            lastWidth = text.count
            console.writeError("\r" + text + padding)
        }
    }

    /// Ends the progress line so that later output starts on a fresh line.
    func finish() {
        guard isEnabled else { return }
        lock.withLock { _ in
            if lastWidth > 0 { console.writeError("\n") }
            lastWidth = 0
        }
    }
}
