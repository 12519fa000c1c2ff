import Foundation
import TokenStore

/// Runs the plan: at each size, TokenStore, then plaintext SQLite, then libsecret per item
/// (interleaved by size so the three see the same machine conditions), each store grown
/// from the previous size.
final class Runner {
    let plan: Plan
    let directory: String
    let appID = "dev.tokenstore.bench"
    var results = RunResults()
    /// Only TokenStore's populate and cold opens (`--open-only`): no get/put/delete/list, no other backend.
    var openOnly = false
    /// Only `get`, TokenStore's and plaintext SQLite's (`--get-only`): no other operation, no libsecret.
    var getOnly = false
    var rng: SplitMix64
    private var generation = 1

    init(plan: Plan, directory: String) {
        self.plan = plan
        self.directory = directory
        rng = SplitMix64(seed: plan.seed)
    }

    var tokenStorePath: String { directory + "/tokenstore/tokens.sqlite" }
    var plaintextPath: String { directory + "/plaintext/items.sqlite" }

    static func log(_ message: String) {
        FileHandle.standardError.write(Data(("tokenbench: " + message + "\n").utf8))
    }

    func run() throws {
        results.baselineRSS = Memory.residentBytes
        results.peakResetWorks = Memory.resetPeak()
        try FileManager.default.createDirectory(atPath: directory + "/plaintext", withIntermediateDirectories: true)

        var store: TokenStore? = try TokenStore(path: tokenStorePath, appID: appID)
        var plaintext: PlaintextStore? = try PlaintextStore(path: plaintextPath)
        let libsecret = try LibsecretItems()
        // Items of an earlier run in the same keyring (scripts/bench uses a fresh one each time).
        do {
            try libsecret.clearAll()
        } catch {
            Self.log("could not clear earlier benchmark items: \(error)")
        }
        var populated: [Backend: Int] = [.tokenStore: 0, .plaintext: 0, .libsecret: 0]

        for size in plan.sizes {
            var figures = SizeFigures(size: size)

            // TokenStore.
            Self.log("TokenStore at \(Format.count(size)) items")
            figures.backends[.tokenStore] = try measureTokenStore(
                &store, size: size, from: populated[.tokenStore]!)
            populated[.tokenStore] = size

            if openOnly {
                results.sizes.append(figures)
                continue
            }
            // Plaintext SQLite.
            Self.log("plaintext SQLite at \(Format.count(size)) items")
            figures.backends[.plaintext] = try measurePlaintext(&plaintext, size: size, from: populated[.plaintext]!)
            populated[.plaintext] = size

            // libsecret, one item per token.
            if !getOnly, plan.libsecretSizes.contains(size) {
                Self.log("libsecret per item at \(Format.count(size)) items")
                figures.backends[.libsecret] = try measureLibsecret(libsecret, size: size, from: populated[.libsecret]!)
                populated[.libsecret] = size
            }
            results.sizes.append(figures)
        }
        // No clean-up of the keyring items: scripts/with-keyring throws the whole keyring away
        // (and one clear of 3,000 items outlasts D-Bus's 25 s timeout).
        store?.close()
        store = nil
        plaintext = nil
    }

    // MARK: TokenStore

    func key(_ index: Int) -> ItemKey { ItemKey(account: AccountID(Workload.account(index), service: Workload.service), kind: .generic) }

    func measureTokenStore(_ holder: inout TokenStore?, size: Int, from: Int) throws -> BackendFigures {
        var figures = BackendFigures()
        if holder == nil { holder = try TokenStore(path: tokenStorePath, appID: appID) }
        guard let store = holder else { fatalError("unreachable") }
        Memory.resetPeak()
        let rssAtStart = Memory.residentBytes

        // Grow the store with the public, durable `set` (one transaction per item).
        let populateStart = monotonicNanos()
        for index in from..<size {
            try store.set(SecretBytes(Workload.token(index)), for: key(index))
        }
        figures.populateSeconds = Double(monotonicNanos() - populateStart) / 1e9

        // Correctness first: a benchmark of wrong answers is worthless.
        for index in [0, size / 2, size - 1] {
            guard let secret = try store.secret(for: key(index)) else {
                throw BenchFailure("TokenStore lost item \(index)")
            }
            let expected = Workload.token(index)
            let current = secret.copyBytes()
            guard current.count == expected.count else { throw BenchFailure("TokenStore returned a wrong size") }
        }

        if openOnly {
            store.close()
            holder = nil
            (figures.samples[.openChild], figures.samples[.openSpawn]) = try coldOpens(size: size) { index in
                ["open-once", tokenStorePath, appID, String(index)]
            }
            holder = try TokenStore(path: tokenStorePath, appID: appID)
            return figures
        }

        // get: random existing items.
        figures.samples[.get] = try rounds(warmup: plan.getWarmup, count: plan.getIterations) {
            let itemKey = key(Int.random(in: 0..<size, using: &rng))
            let (secret, nanos) = try timed { try store.secret(for: itemKey) }
            guard secret != nil else { throw BenchFailure("TokenStore get missed") }
            return nanos
        }
        if getOnly { return figures }

        // put: overwrite random existing items (durable upsert: BEGIN IMMEDIATE … COMMIT, fsync).
        figures.samples[.put] = try rounds(warmup: plan.putWarmup, count: plan.putIterations) {
            let index = Int.random(in: 0..<size, using: &rng)
            let itemKey = key(index)
            let value = SecretBytes(Workload.token(index, generation: nextGeneration()))
            return try timed { try store.set(value, for: itemKey) }.nanos
        }

        // delete: a random item, put back (untimed) so the size stays the same.
        figures.samples[.delete] = try rounds(warmup: 0, count: plan.deleteIterations) {
            let index = Int.random(in: 0..<size, using: &rng)
            let itemKey = key(index)
            let nanos = try timed { () throws -> Void in try store.delete(itemKey) }.nanos
            try store.set(SecretBytes(Workload.token(index)), for: itemKey)
            return nanos
        }

        // list: every item's metadata, streamed (forEachItem opens one row at a time).
        let peakBeforeList = Memory.peakBytes
        Memory.resetPeak()
        let rssBeforeList = Memory.residentBytes
        figures.samples[.list] = try rounds(warmup: 1, count: plan.listIterations(size: size)) {
            var count = 0
            let nanos = try timed { try store.forEachItem { _ in count += 1 } }.nanos
            guard count == size else { throw BenchFailure("TokenStore listed \(count) of \(size) items") }
            return nanos
        }
        figures.listPeakGrowth = Memory.peakBytes - rssBeforeList
        figures.peakRSS = max(peakBeforeList, Memory.peakBytes)
        figures.peakGrowth = figures.peakRSS - rssAtStart

        // Bytes on disk: closing the only connection checkpoints and removes the WAL.
        store.close()
        holder = nil
        figures.bytesPerItem = Double(DiskUsage.sqliteBytes(tokenStorePath)) / Double(size)

        // Cold open: a new process opens the store (key fetch from gnome-keyring) and reads one item.
        (figures.samples[.openChild], figures.samples[.openSpawn]) = try coldOpens(size: size) { index in
            ["open-once", tokenStorePath, appID, String(index)]
        }
        holder = try TokenStore(path: tokenStorePath, appID: appID)
        return figures
    }

    // MARK: Plaintext SQLite

    func measurePlaintext(_ holder: inout PlaintextStore?, size: Int, from: Int) throws -> BackendFigures {
        var figures = BackendFigures()
        if holder == nil { holder = try PlaintextStore(path: plaintextPath) }
        guard let store = holder else { fatalError("unreachable") }
        Memory.resetPeak()
        let rssAtStart = Memory.residentBytes

        // Populate in one transaction (not measured).
        let populateStart = monotonicNanos()
        if from < size { try store.populate(from..<size) }
        figures.populateSeconds = Double(monotonicNanos() - populateStart) / 1e9
        guard try store.get(lookup: PlaintextStore.lookup(size - 1)) == Workload.token(size - 1) else {
            throw BenchFailure("plaintext lost an item")
        }

        figures.samples[.get] = try rounds(warmup: plan.getWarmup, count: plan.getIterations) {
            let lookup = PlaintextStore.lookup(Int.random(in: 0..<size, using: &rng))
            let (value, nanos) = try timed { try store.get(lookup: lookup) }
            guard value != nil else { throw BenchFailure("plaintext get missed") }
            return nanos
        }
        if getOnly { return figures }
        figures.samples[.put] = try rounds(warmup: plan.putWarmup, count: plan.putIterations) {
            let index = Int.random(in: 0..<size, using: &rng)
            let value = Workload.token(index, generation: nextGeneration())
            return try timed { try store.put(index: index, value: value) }.nanos
        }
        figures.samples[.delete] = try rounds(warmup: 0, count: plan.deleteIterations) {
            let index = Int.random(in: 0..<size, using: &rng)
            let lookup = PlaintextStore.lookup(index)
            let nanos = try timed { () throws -> Void in try store.delete(lookup: lookup) }.nanos
            try store.put(index: index, value: Workload.token(index))
            return nanos
        }
        figures.samples[.list] = try rounds(warmup: 1, count: plan.listIterations(size: size)) {
            let (count, nanos) = try timed { try store.list() }
            guard count == size else { throw BenchFailure("plaintext listed \(count) of \(size) items") }
            return nanos
        }
        figures.peakRSS = Memory.peakBytes
        figures.peakGrowth = figures.peakRSS - rssAtStart

        store.close()  // the only connection: checkpoint, WAL removed
        holder = nil
        figures.bytesPerItem = Double(DiskUsage.sqliteBytes(plaintextPath)) / Double(size)

        (figures.samples[.openChild], figures.samples[.openSpawn]) = try coldOpens(size: size) { index in
            ["plaintext-open-once", plaintextPath, String(index)]
        }
        holder = try PlaintextStore(path: plaintextPath)
        return figures
    }

    // MARK: libsecret per item

    func measureLibsecret(_ items: LibsecretItems, size: Int, from: Int) throws -> BackendFigures {
        var figures = BackendFigures()
        Memory.resetPeak()
        let rssAtStart = Memory.residentBytes

        let populateStart = monotonicNanos()
        for index in from..<size { try items.store(index: index, value: Workload.token(index)) }
        figures.populateSeconds = Double(monotonicNanos() - populateStart) / 1e9
        guard try items.lookup(index: size - 1) == Workload.token(size - 1) else {
            throw BenchFailure("libsecret lost an item")
        }

        let lookups = plan.libsecretLookupIterations
        figures.samples[.get] = try rounds(warmup: max(5, lookups / 10), count: lookups) {
            let index = Int.random(in: 0..<size, using: &rng)
            let (value, nanos) = try timed { try items.lookup(index: index) }
            guard value != nil else { throw BenchFailure("libsecret lookup missed") }
            return nanos
        }
        figures.samples[.put] = try rounds(warmup: 2, count: plan.libsecretStoreIterations(size: size)) {
            let index = Int.random(in: 0..<size, using: &rng)
            let value = Workload.token(index, generation: nextGeneration())
            return try timed { try items.store(index: index, value: value) }.nanos
        }
        figures.samples[.delete] = try rounds(warmup: 0, count: plan.libsecretClearIterations(size: size)) {
            let index = Int.random(in: 0..<size, using: &rng)
            let (cleared, nanos) = try timed { try items.clear(index: index) }
            guard cleared else { throw BenchFailure("libsecret clear found nothing") }
            try items.store(index: index, value: Workload.token(index))
            return nanos
        }
        figures.samples[.list] = try rounds(warmup: 1, count: plan.libsecretListIterations(size: size)) {
            // Under load gnome-keyring's search can still name an item the delete phase just
            // replaced, and libsecret then fails the whole listing ("No such secret item"): such a
            // round waits half a second and is measured again, up to five times.
            var attempt = 1
            while true {
                do {
                    let (count, nanos) = try timed { try items.list() }
                    guard count == size else { throw BenchFailure("libsecret listed \(count) of \(size) items") }
                    return nanos
                } catch where attempt < 5 {
                    attempt += 1
                    usleep(500_000)
                }
            }
        }
        figures.peakRSS = Memory.peakBytes
        figures.peakGrowth = figures.peakRSS - rssAtStart
        figures.bytesPerItem = Double(keyringBytes()) / Double(size)

        // Cold: a new process making its first libsecret lookup (D-Bus connection, session
        // negotiation, search, secret transfer).
        (figures.samples[.openChild], figures.samples[.openSpawn]) = try coldOpens(size: size) { index in
            ["libsecret-lookup-once", String(index)]
        }
        return figures
    }

    /// The size of gnome-keyring's files (`$XDG_DATA_HOME/keyrings`), which hold every item.
    func keyringBytes() -> Int {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_DATA_HOME"] ?? ((environment["HOME"] ?? "") + "/.local/share")
        return DiskUsage.directoryBytes(base + "/keyrings")
    }

    // MARK: Shared loops

    /// `warmup + count` rounds of `round`, which times its own operation (see `timed`) and
    /// returns the nanoseconds; the warm-up rounds are dropped.
    func rounds(warmup: Int, count: Int, _ round: () throws -> UInt64) rethrows -> Samples {
        var samples = Samples(capacity: count)
        for iteration in 0..<(warmup + count) {
            let nanos = try round()
            if iteration >= warmup { samples.add(nanos) }
        }
        return samples
    }

    /// Cold open: `plan.coldOpens` new processes, each running the tokenbench child command
    /// `arguments(index)` for a random item, after one more that warms the page cache and the
    /// binary. Returns the open-and-read time each child measured and the wall time of each spawn.
    func coldOpens(size: Int, _ arguments: (Int) -> [String]) throws -> (inChild: Samples, spawned: Samples) {
        var inChild = Samples(), spawned = Samples()
        for iteration in 0..<(plan.coldOpens + 1) {
            let command = arguments(Int.random(in: 0..<size, using: &rng))
            let result = try BenchChild.run(command)
            guard let nanos = result.fields["open_get_ns"].flatMap(UInt64.init) else {
                throw BenchFailure("\(command[0]) printed no figure")
            }
            if iteration > 0 {
                inChild.add(nanos)
                spawned.add(result.wallNanos)
            }
        }
        return (inChild, spawned)
    }

    private func nextGeneration() -> Int {
        generation += 1
        return generation
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
