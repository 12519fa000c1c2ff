import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Cross-process change events (`TokenStore.changes`, `observeChanges`): what each write
/// reports, in which order, from this process and from another one, how fast, with what idle
/// cost, and after a missed wake-up.
@Suite("Change events", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ChangeEventTests {
    /// Changes collected by a handler, awaited with a deadline.
    final class Collected: Sendable {
        private let changes = Locked<[StoreChange]>([])
        func add(_ change: StoreChange) { changes.mutate { $0.append(change) } }
        var all: [StoreChange] { changes.value }

        /// Waits until at least `count` changes arrived (or 10 s passed); returns them.
        func wait(for count: Int) -> [StoreChange] {
            wait { $0.count >= count }
        }

        /// Waits until the changes so far satisfy `done` (or 10 s passed); returns them.
        func wait(until done: ([StoreChange]) -> Bool) -> [StoreChange] {
            let deadline = Date().addingTimeInterval(10)
            while !done(all), Date() < deadline { usleep(2_000) }
            return all
        }
    }

    @Test("each kind of write reports its change, in commit order, naming no secret")
    func eachKind() throws {
        let f = try TestStore()
        let collected = Collected()
        let observation = try f.store.observeChanges { collected.add($0) }
        defer { observation.cancel() }

        try f.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-1"), appleUserID: "user-a", accessToken: nil)
        #expect(try f.store.ledger.replaceRefreshToken(
            account: "alice", presented: secret("rt-1"), with: secret("rt-2"), accessToken: nil) == .stored)
        try f.store.set(secret("generic"), for: key("alice", .generic))  // no session change: nothing reported
        #expect(try f.store.ledger.clearLocally(account: "alice"))
        _ = try f.store.rotateDataKey()
        let expected: [StoreChange] = [
            .accountAdded("alice"), .credentialStateChanged(userID: "user-a", from: .notFound, to: .authorized),
            .tokensRenewed("alice"),
            .accountRemoved("alice"), .credentialStateChanged(userID: "user-a", from: .authorized, to: .revoked),
            .keyRotated,
        ]
        let got = collected.wait(for: expected.count)
        #expect(got == expected)
        for change in got {
            #expect(!change.description.contains("alice") && !change.description.contains("user-a"), "\(change)")
        }
        usleep(300_000)  // past the follow-up check: nothing is reported twice
        #expect(collected.all.count == expected.count, "\(collected.all)")
    }

    @Test("the AsyncSequence sees another connection's writes and ends when the store closes")
    func asyncSequence() async throws {
        let f = try TestStore()
        let changes = f.store.changes
        let reader = Task {
            var seen: [StoreChange] = []
            for try await change in changes { seen.append(change) }
            return seen
        }
        let other = try f.reopen()  // a second connection: its commits reach the first only through the file
        try other.set(secret("rt"), for: key("bob"))
        try other.delete(key("bob"))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
            if try f.store.counts().items == 0 { break }
        }
        try await Task.sleep(for: .milliseconds(400))
        f.store.close()
        let seen = try await reader.value
        #expect(seen == [.accountAdded("bob"), .accountRemoved("bob")])
    }

    @Test("a subscription on a closed store throws storeClosed")
    func closedStore() async throws {
        let f = try TestStore()
        f.store.close()
        #expect(throws: TokenStoreError.storeClosed) { _ = try f.store.observeChanges { _ in } }
        await #expect(throws: TokenStoreError.storeClosed) {
            for try await _ in f.store.changes {}
        }
    }

    @Test("two processes: p95 latency of an event, and the watcher's idle CPU")
    func twoProcesses() throws {
        let f = try TestStore()
        let watcher = try ChildProcess.start(
            try BuiltProducts.executable("tokenstore-testchild").path, ["watch", f.path, "3000"],
            environment: childEnvironment())
        defer { _ = watcher.stop() }
        let idle = try waitForLine(watcher, prefix: "IDLE ")
        let idleCPU = Int(idle.split(separator: " ").first { $0.hasPrefix("cpu_us=") }?.dropFirst(7) ?? "") ?? -1
        let rounds = 50
        var latencies: [Double] = []
        for round in 0..<rounds {
            let account = "acct-\(round)"
            for (write, kind) in [({ try f.store.set(secret("rt-\(round)"), for: key(account)) }, "accountAdded"),
                                  ({ try f.store.delete(key(account)) }, "accountRemoved")] as [(() throws -> Void, String)] {
                let before = monotonicNanoseconds()
                try write()
                let line = try waitForLine(watcher, prefix: "EVENT \(kind) ", suffix: " \(account)")
                let at = UInt64(line.split(separator: " ")[2]) ?? 0
                latencies.append(Double(at - before) / 1e6)
            }
        }
        latencies.sort()
        let p95 = latencies[Int(Double(latencies.count) * 0.95) - 1]
        Reliability.metric("change_events", [
            "events": latencies.count, "p50_ms": String(format: "%.2f", latencies[latencies.count / 2]),
            "p95_ms": String(format: "%.2f", p95), "max_ms": String(format: "%.2f", latencies.last ?? 0),
            "idle_cpu_ms": String(format: "%.3f", Double(idleCPU) / 1000), "idle_s": 3,
        ])
        #expect(p95 <= 500, "p95 \(p95) ms")
        #expect(idleCPU >= 0 && idleCPU < 20_000, "an idle watcher used \(idleCPU) µs of CPU in 3 s")
    }

    @Test("a watcher stopped while more changes than the log keeps were made reports the difference")
    func missedWakeUp() throws {
        let f = try TestStore()
        try f.store.ledger.saveSignIn(account: "gone", refreshToken: secret("rt-g"), appleUserID: "user-g", accessToken: nil)
        let watcher = try ChildProcess.start(
            try BuiltProducts.executable("tokenstore-testchild").path, ["watch", f.path, "0"], environment: childEnvironment())
        defer { _ = watcher.stop() }
        _ = try waitForLine(watcher, prefix: "IDLE ")
        watcher.signal(SIGSTOP)
        try f.store.ledger.saveSignIn(account: "new", refreshToken: secret("rt-0"), appleUserID: "user-n", accessToken: nil)
        #expect(try f.store.ledger.clearLocally(account: "gone"))
        for n in 0..<Int(ChangeLog.kept) {
            _ = try f.store.ledger.replaceRefreshToken(
                account: "new", presented: secret("rt-\(n)"), with: secret("rt-\(n + 1)"), accessToken: nil)
        }
        watcher.signal(SIGCONT)
        _ = try waitForLine(watcher, prefix: "EVENT accountRemoved ", suffix: " gone")
        _ = try waitForLine(watcher, prefix: "EVENT accountAdded ", suffix: " new")
        _ = try waitForLine(watcher, prefix: "EVENT credentialStateChanged ", suffix: " user-g:authorized:revoked")
        _ = try waitForLine(watcher, prefix: "EVENT credentialStateChanged ", suffix: " user-n:notFound:authorized")
    }

    @Test("a change-log row that does not open is a gap, never an error or a wrong change")
    func tamperedRow() throws {
        let f = try TestStore()
        try f.store.set(secret("rt"), for: key("carol"))
        try f.store.set(secret("rt"), for: key("dave"))
        let raw = try f.rawDatabase()
        try raw.run("UPDATE change_log SET sealed = zeroblob(length(sealed)) WHERE seq = 2")
        let read = try f.store.connection.read { db, envelope in try ChangeLog.read(db, after: 0, envelope: envelope) }
        #expect(read.gap)
        #expect(read.changes.map(\.change) == [.accountAdded("carol")])
        #expect(read.newest == 2)
        // Nothing of the names is in the clear in the file.
        for (file, bytes) in f.fileBytes() { #expect(!bytes.contains("carol") && !bytes.contains("dave"), "\(file)") }
    }

    @Test("an explicit lock and unlock of the object: storeLocked then storeUnlocked, once each, after the earlier writes")
    func explicitLock() throws {
        let f = try TestStore()
        let collected = Collected()
        let observation = try f.store.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        try f.store.set(secret("rt"), for: key("erin"))
        #expect(collected.wait(for: 1) == [.accountAdded("erin")])
        try f.store.lock()
        try f.store.lock()  // already locked: no second event
        #expect(collected.wait(for: 2) == [.accountAdded("erin"), .storeLocked])
        try f.store.unlock()
        #expect(collected.wait(for: 3) == [.accountAdded("erin"), .storeLocked, .storeUnlocked])
        _ = try f.store.secret(for: key("erin"))
        usleep(300_000)
        #expect(collected.all.count == 3, "\(collected.all)")
        #expect(StoreChange.storeLocked.description == "storeLocked" && StoreChange.storeLocked.account == nil)
    }

    @Test("another object's lock and unlock for every process on the same file reach this object's subscribers")
    func lockForEveryProcess() throws {
        let f = try TestStore()
        try f.store.set(secret("rt"), for: key("frank"))
        let collected = Collected()
        let observation = try f.store.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        let other = try f.reopen()  // its record write reaches the first object only through the file
        try other.lock(allProcesses: true)
        #expect(collected.wait(for: 1) == [.storeLocked])
        #expect(f.store.isLocked)
        try other.unlock(allProcesses: true)
        #expect(collected.wait(for: 2) == [.storeLocked, .storeUnlocked])
        #expect(!f.store.isLocked)
        #expect(try f.store.secret(for: key("frank")) == secret("rt"))
        usleep(300_000)
        #expect(collected.all == [.storeLocked, .storeUnlocked])
    }

    @Test("a write right before a lock of the same object: its change arrives before storeLocked, every round")
    func writeThenLock() throws {
        let f = try TestStore()
        let collected = Collected()
        let observation = try f.store.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        var expected: [StoreChange] = []
        for round in 0..<20 {  // the lock comes before the watcher thread is scheduled after the commit
            let account = AccountID("write-lock-\(round)")
            try f.store.set(secret("rt"), for: ItemKey(account: account, kind: .refreshToken))
            try f.store.lock()
            try f.store.unlock()
            expected += [.accountAdded(account), .storeLocked, .storeUnlocked]
        }
        #expect(collected.wait(for: expected.count) == expected)
        usleep(300_000)
        #expect(collected.all.count == expected.count, "\(collected.all)")
    }

    @Test("another object's write and its lock for every process, both before the watcher reads: the change arrives before storeLocked")
    func otherWriteThenLockEverywhere() throws {
        let f = try TestStore()
        try f.store.set(secret("seed"), for: key("seed", .generic))  // no event; forEachItem's body runs for it
        let collected = Collected()
        let observation = try f.store.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        let other = try f.reopen()  // its commits reach the first object only through the file
        var expected: [StoreChange] = []
        for round in 0..<5 {
            let account = AccountID("other-lock-\(round)")
            var written = false
            // Inside this object's read (its connection held), so that its watcher reads only once both have committed.
            try f.store.forEachItem { _ in
                guard !written else { return }
                written = true
                try other.set(secret("rt"), for: ItemKey(account: account, kind: .refreshToken))
                try other.lock(allProcesses: true)
            }
            expected += [.accountAdded(account), .storeLocked]
            // Unlocked only once this object took the lock up (else it may never see it locked).
            _ = collected.wait { $0.filter { $0 == .storeLocked }.count > round }
            try other.unlock(allProcesses: true)
            expected.append(.storeUnlocked)
            _ = collected.wait { $0.filter { $0 == .storeUnlocked }.count > round }
        }
        #expect(collected.all == expected)
    }

    @Test("a subscription made while the store is locked for every process starts; the unlock and later writes arrive")
    func subscribeWhileLocked() throws {
        let f = try TestStore()
        try f.store.set(secret("rt"), for: key("gina"))
        try f.store.lock(allProcesses: true)
        let opened = try f.reopen()  // opened while the lock is recorded: locked from the start
        #expect(opened.isLocked)
        let collected = Collected(), second = Collected()
        let observation = try opened.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        let secondObservation = try opened.observeChanges { second.add($0) }  // the watcher runs already
        defer { secondObservation.cancel() }
        usleep(300_000)
        #expect(collected.all.isEmpty)
        try f.store.unlock(allProcesses: true)
        #expect(collected.wait(for: 1) == [.storeUnlocked])
        #expect(!opened.isLocked)
        try f.store.set(secret("rt"), for: key("hank"))
        try f.store.delete(key("gina"))
        let expected: [StoreChange] = [.storeUnlocked, .accountAdded("hank"), .accountRemoved("gina")]
        #expect(collected.wait(for: 3) == expected)
        #expect(second.wait(for: 3) == expected)
    }

    @Test("the idle lock reports storeLocked; the unlock after it storeUnlocked")
    func idleLock() throws {
        let f = try TestStore()
        f.store.close()
        var options = TokenStore.Options()
        options.lockAfterIdle = .milliseconds(300)
        let store = try TokenStore(path: f.path, appID: testAppID, options: options)
        defer { store.close() }
        let collected = Collected()
        let observation = try store.observeChanges { collected.add($0) }
        defer { observation.cancel() }
        #expect(collected.wait(for: 1) == [.storeLocked])
        #expect(store.isLocked)
        try store.unlock()
        #expect(Array(collected.wait(for: 2).prefix(2)) == [.storeLocked, .storeUnlocked])  // idle again later: locked again
    }

    /// The first line of `child`'s output so far that starts with `prefix` (and ends with
    /// `suffix`), waiting up to 15 s for it.
    private func waitForLine(_ child: ChildProcess, prefix: String, suffix: String = "") throws -> String {
        let deadline = monotonicNanoseconds() + 15_000_000_000
        while monotonicNanoseconds() < deadline {
            let text = String(decoding: child.captured("stdout"), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }) {
                return String(line)
            }
            if let ended = child.poll() {
                throw PrivateKeyringError("the watcher ended (\(ended)): \(String(decoding: child.captured("stderr"), as: UTF8.self))")
            }
            usleep(1_000)
        }
        throw PrivateKeyringError("no line \(prefix)…\(suffix) within 15 s; output: \(String(decoding: child.captured("stdout"), as: UTF8.self).suffix(2000))")
    }
}
