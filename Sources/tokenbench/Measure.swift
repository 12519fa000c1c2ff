import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds. Cheaper to read than
/// `ContinuousClock.now` and the same source on Linux.
@inline(__always)
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Runs `body` once; returns its value and how long it took.
@inline(__always)
func timed<T>(_ body: () throws -> T) rethrows -> (value: T, nanos: UInt64) {
    let start = monotonicNanos()
    let value = try body()
    return (value, monotonicNanos() - start)
}

/// Latencies of one measured operation, in nanoseconds.
struct Samples {
    private(set) var values: [UInt64] = []

    init(capacity: Int = 0) { values.reserveCapacity(capacity) }

    mutating func add(_ nanos: UInt64) { values.append(nanos) }

    var count: Int { values.count }

    /// Nearest-rank percentile (`q` in 0...1).
    func percentile(_ q: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = max(1, Int((q * Double(sorted.count)).rounded(.up)))
        return Double(sorted[min(rank, sorted.count) - 1])
    }

    var p50: Double { percentile(0.50) }
    var p99: Double { percentile(0.99) }

    /// Operations per second over the timed calls only (one thread).
    var opsPerSecond: Double {
        let total = values.reduce(0, +)
        return total == 0 ? .nan : Double(values.count) * 1e9 / Double(total)
    }
}

/// Process memory from /proc/self/status, in bytes.
enum Memory {
    static func statusField(_ name: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0"
            return (Int(digits.trimmingCharacters(in: .whitespaces)) ?? 0) * 1024
        }
        return 0
    }

    /// The resident set now (VmRSS).
    static var residentBytes: Int { statusField("VmRSS") }
    /// The peak resident set since start or since the last ``resetPeak()`` (VmHWM).
    static var peakBytes: Int { statusField("VmHWM") }

    /// Resets VmHWM to the current RSS (Linux: `5` to /proc/self/clear_refs). Returns false
    /// when the kernel refuses, in which case peaks are process-lifetime peaks.
    @discardableResult
    static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        do {
            try handle.write(contentsOf: Data("5".utf8))
            return true
        } catch {
            return false
        }
    }

    /// ru_maxrss (KiB on Linux), the lifetime peak, as a cross-check.
    static var lifetimeMaxRSSBytes: Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Int(usage.ru_maxrss) * 1024
    }
}

/// A small deterministic PRNG (SplitMix64) so runs pick the same keys for a given seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Sizes of files on disk.
enum DiskUsage {
    /// Bytes of `path` plus its `-wal` and `-shm` companions (those that exist).
    static func sqliteBytes(_ path: String) -> Int {
        [path, path + "-wal", path + "-shm"].reduce(0) { $0 + fileBytes($1) }
    }

    static func fileBytes(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }

    /// Total size of the regular files under `directory`.
    static func directoryBytes(_ directory: String) -> Int {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return 0 }
        var total = 0
        while let name = enumerator.nextObject() as? String {
            total += fileBytes(directory + "/" + name)
        }
        return total
    }
}

/// Formatting helpers for the table.
enum Format {
    static func duration(_ nanos: Double) -> String {
        guard nanos.isFinite else { return "—" }
        if nanos < 1_000 { return String(format: "%.0f ns", nanos) }
        if nanos < 100_000 { return String(format: "%.1f µs", nanos / 1e3) }
        if nanos < 1_000_000 { return String(format: "%.0f µs", nanos / 1e3) }
        if nanos < 100_000_000 { return String(format: "%.2f ms", nanos / 1e6) }
        if nanos < 10_000_000_000 { return String(format: "%.0f ms", nanos / 1e6) }
        return String(format: "%.1f s", nanos / 1e9)
    }

    static func rate(_ perSecond: Double) -> String {
        guard perSecond.isFinite else { return "—" }
        if perSecond >= 1e6 { return String(format: "%.2fM", perSecond / 1e6) }
        if perSecond >= 1e4 { return String(format: "%.0fk", perSecond / 1e3) }
        if perSecond >= 1e3 { return String(format: "%.1fk", perSecond / 1e3) }
        if perSecond >= 10 { return String(format: "%.0f", perSecond) }
        return String(format: "%.1f", perSecond)
    }

    static func bytes(_ count: Int) -> String {
        let value = Double(count)
        if value >= Double(1 << 30) { return String(format: "%.2f GiB", value / Double(1 << 30)) }
        if value >= Double(1 << 20) { return String(format: "%.1f MiB", value / Double(1 << 20)) }
        if value >= Double(1 << 10) { return String(format: "%.1f KiB", value / Double(1 << 10)) }
        return "\(count) B"
    }

    /// `a / b` as a ratio with 3 significant figures, or `—`.
    static func ratio(_ a: Double, _ b: Double) -> String {
        guard a.isFinite, b.isFinite, b > 0 else { return "—" }
        let r = a / b
        if r >= 100 { return String(format: "%.0f", r) }
        if r >= 10 { return String(format: "%.1f", r) }
        if r >= 0.1 { return String(format: "%.2f", r) }
        return String(format: "%.4f", r)
    }

    static func count(_ n: Int) -> String {
        let digits = String(n)
        var out = ""
        for (index, char) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(char)
        }
        return out
    }
}
