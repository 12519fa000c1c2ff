import Foundation

/// What every backend stores: N items named by index, each a 1 KiB printable token.
struct Workload {
    static let service = "bench"
    static let tokenBytes = 1_024

    /// The account name of item `index` (the same for every backend).
    static func account(_ index: Int) -> String { "user-\(index)@example.com" }

    /// A 1 KiB token, printable ASCII (libsecret's password API stores text), different per
    /// `index` and `generation` so an overwrite really changes the value.
    static func token(_ index: Int, generation: Int = 0) -> [UInt8] {
        var rng = SplitMix64(seed: UInt64(truncatingIfNeeded: index) &* 0x1000_0001 &+ UInt64(truncatingIfNeeded: generation))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var bytes = [UInt8](repeating: 0, count: tokenBytes)
        var word: UInt64 = 0
        for position in 0..<tokenBytes {
            if position % 10 == 0 { word = rng.next() }
            bytes[position] = alphabet[Int(word & 63)]
            word >>= 6
        }
        return bytes
    }
}

/// Which operations the run measures at each size, and how often.
struct Plan {
    let quick: Bool
    /// Store sizes for TokenStore and plaintext SQLite.
    let sizes: [Int]
    /// Sizes at which libsecret per item is measured (a subset of `sizes`).
    let libsecretSizes: Set<Int>
    let getWarmup: Int
    let getIterations: Int
    let putWarmup: Int
    let putIterations: Int
    let deleteIterations: Int
    let coldOpens: Int
    let libsecretLookupIterations: Int
    let sessionIterations: Int
    let seed: UInt64

    /// libsecret stores get slower as the keyring grows (gnome-keyring rewrites its file on
    /// every change), so fewer samples at the larger sizes keep the run within its budget.
    func libsecretStoreIterations(size: Int) -> Int {
        if quick { return 8 }
        switch size {
        case ..<500: return 60
        case ..<2_000: return 25
        default: return 12
        }
    }

    func libsecretClearIterations(size: Int) -> Int {
        if quick { return 5 }
        switch size {
        case ..<500: return 30
        case ..<2_000: return 12
        default: return 6
        }
    }

    /// A libsecret listing creates a proxy object per item: seconds at 3,000 items.
    func libsecretListIterations(size: Int) -> Int {
        if quick { return 3 }
        return size >= 1_000 ? 5 : 10
    }

    /// Full listings per size: enough for a median, bounded for 100,000 items.
    func listIterations(size: Int) -> Int {
        if quick { return 5 }
        return max(5, min(60, 400_000 / size))
    }

    static func full(seed: UInt64) -> Plan {
        Plan(
            quick: false, sizes: [100, 200, 1_000, 3_000, 10_000, 100_000], libsecretSizes: [100, 200, 1_000, 3_000],
            getWarmup: 2_000, getIterations: 20_000, putWarmup: 30, putIterations: 400, deleteIterations: 200,
            coldOpens: 25, libsecretLookupIterations: 300, sessionIterations: 100, seed: seed)
    }

    static func quick(seed: UInt64) -> Plan {
        Plan(
            quick: true, sizes: [100, 200, 1_000], libsecretSizes: [100, 200],
            getWarmup: 200, getIterations: 2_000, putWarmup: 5, putIterations: 60, deleteIterations: 30,
            coldOpens: 5, libsecretLookupIterations: 40, sessionIterations: 10, seed: seed)
    }
}
