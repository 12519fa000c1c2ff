import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Access policies recorded under the store's MAC (schema 15), and the explicit lock: a locked
/// store object has no data key in memory and refuses every read and write with `storeLocked`
/// until it is unlocked, which fetches the key again from the (real) Secret Service.
@Suite("Access policies and the store lock", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct AccessPolicyTests {
    private func record(_ path: String) throws -> (String?, Int64, Int) {
        let raw = try Database(path: path)
        return try raw.firstRow("SELECT access_policy, locked_everywhere, length(access_mac) FROM store_info WHERE id = 1", []) {
            ($0.isNull(0) ? nil : $0.text(0), $0.int(1), Int($0.int(2)))
        }!
    }

    private func expectIntegrityFailure(_ path: String, _ what: String) {
        #expect(throws: TokenStoreError.integrityCheckFailed, "\(what)") { _ = try TokenStore(path: path, appID: testAppID) }
    }

    @Test("policy names round-trip; a weaker policy is weaker")
    func names() {
        let all: [AccessPolicy] = [
            .afterFirstUnlock, .whenUnlocked, .userPresence(.always), .userPresence(.session(seconds: 300)),
            .userPresence(.appLifecycle(seconds: 60)),
        ]
        for policy in all { #expect(AccessPolicy(name: policy.name) == policy, "\(policy.name)") }
        for bad in ["", "whenunlocked", "userPresence:session", "userPresence:session:0", "userPresence:session:-5",
                    "userPresence:session:9999999999", "userPresence:forever:5", "afterFirstUnlock:1"] {
            #expect(AccessPolicy(name: bad) == nil, "\(bad)")
        }
        #expect(AccessPolicy.afterFirstUnlock.isWeaker(than: .whenUnlocked))
        #expect(AccessPolicy.whenUnlocked.isWeaker(than: .userPresence(.session(seconds: 300))))
        #expect(AccessPolicy.userPresence(.session(seconds: 600)).isWeaker(than: .userPresence(.session(seconds: 300))))
        #expect(AccessPolicy.userPresence(.appLifecycle(seconds: 300)).isWeaker(than: .userPresence(.always)))
        #expect(!AccessPolicy.whenUnlocked.isWeaker(than: .afterFirstUnlock))
    }

    @Test("a new store records afterFirstUnlock, unlocked, under a MAC; it survives a key rotation")
    func recordedAtCreation() throws {
        let f = try TestStore()
        #expect(f.store.accessPolicy == .afterFirstUnlock)
        let (name, locked, macLength) = try record(f.path)
        #expect(name == "afterFirstUnlock" && locked == 0 && macLength == 32)
        try f.store.set(secret("s1"), for: key("alice", .generic))
        _ = try f.store.rotateDataKey()
        f.store.close()
        let reopened = try f.reopen()
        #expect(try reopened.secret(for: key("alice", .generic)) == secret("s1"))
        #expect(reopened.accessPolicy == .afterFirstUnlock)
    }

    @Test("an edited, removed, swapped or unlocked-by-hand record is integrityCheckFailed")
    func tamperedRecord() throws {
        let a = try TestStore(), b = try TestStore()
        try b.store.lock(allProcesses: true)  // b's record: locked, under b's key
        a.store.close()
        b.store.close()
        let original = try Database(path: a.path).firstRow("SELECT access_policy, locked_everywhere, access_mac FROM store_info", []) {
            ($0.text(0), $0.int(1), $0.blob(2))
        }!
        func restore() throws {
            try Database(path: a.path).run(
                "UPDATE store_info SET access_policy = ?, locked_everywhere = ?, access_mac = ?",
                [.text(original.0), .int(original.1), .blob(original.2)])
        }
        // Stronger by hand (an attacker cannot pick either direction without the key).
        try Database(path: a.path).run("UPDATE store_info SET access_policy = 'whenUnlocked'")
        expectIntegrityFailure(a.path, "edited name")
        try restore()
        try Database(path: a.path).run("UPDATE store_info SET access_policy = NULL, access_mac = NULL")
        expectIntegrityFailure(a.path, "removed")
        try restore()
        try Database(path: a.path).run("UPDATE store_info SET locked_everywhere = 1")
        expectIntegrityFailure(a.path, "lock byte flipped")
        try restore()
        let swapped = try Database(path: b.path).firstRow("SELECT access_policy, locked_everywhere, access_mac FROM store_info", []) {
            ($0.text(0), $0.int(1), $0.blob(2))
        }!
        try Database(path: a.path).run(
            "UPDATE store_info SET access_policy = ?, locked_everywhere = ?, access_mac = ?", [.text(swapped.0), .int(swapped.1), .blob(swapped.2)])
        expectIntegrityFailure(a.path, "another store's record")
        try restore()
        _ = try TokenStore(path: a.path, appID: testAppID)  // the original opens again
    }

    @Test("a store recording whenUnlocked is not opened as afterFirstUnlock where no lock source can be followed")
    func noDowngradeAtOpen() throws {
        let f = try TestStore()
        try f.store.connection.write { db, envelope in
            try AccessPolicyRecord.write(db, .init(policy: .whenUnlocked, lockedEverywhere: false), envelope: envelope)
        }
        f.store.close()
        let before = try record(f.path)
        #expect(throws: TokenStoreError.lockSourceUnavailable) {
            _ = try TokenStore(path: f.path, appID: testAppID, options: .init(accessPolicy: .afterFirstUnlock))
        }
        #expect(try record(f.path) == before)
    }

    @Test("a new store asked for a policy this process cannot enforce: refused before its file and its key are made")
    func refusedNewStoreLeavesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("new/tokens.sqlite").path
        let provider = MemoryKeyProvider()  // what the open gave its key provider, and only that
        #expect(throws: TokenStoreError.lockSourceUnavailable) {
            _ = try TokenStore(path: path, appID: testAppID, keyProvider: provider, options: .init(accessPolicy: .whenUnlocked))
        }
        #expect(!FileManager.default.fileExists(atPath: path), "a store file was made")
        #expect(provider.snapshot.isEmpty, "a key (or an epoch) was stored: \(provider.snapshot.keys.sorted())")
    }

    @Test("lock() wipes the data key: reads and writes are storeLocked; unlock() fetches it again")
    func lockHere() throws {
        let f = try TestStore()
        try f.store.set(secret("s1"), for: key("alice", .generic))
        weak var dataKey: DataKey?
        dataKey = f.store.connection.activeEnvelope?.key
        #expect(dataKey != nil)
        try f.store.lock()
        #expect(f.store.isLocked)
        #expect(dataKey == nil, "the data key is still referenced after the lock (its guarded memory is not freed)")
        #expect(f.store.connection.activeEnvelope == nil)
        #expect(throws: TokenStoreError.storeLocked) { _ = try f.store.secret(for: key("alice", .generic)) }
        #expect(throws: TokenStoreError.storeLocked) { try f.store.set(secret("s2"), for: key("bob", .generic)) }
        #expect(throws: TokenStoreError.storeLocked) { _ = try f.store.items() }
        #expect(f.store.fingerprint(of: secret("s1")) == "")
        try f.store.unlock()
        #expect(!f.store.isLocked)
        #expect(try f.store.secret(for: key("alice", .generic)) == secret("s1"))
        try f.store.set(secret("s2"), for: key("bob", .generic))
        #expect(try f.store.secret(for: key("bob", .generic)) == secret("s2"))
    }

    @Test("lock(allProcesses:) reaches another connection at its next call; only unlock(allProcesses:) lifts it")
    func lockEverywhere() throws {
        let f = try TestStore()
        try f.store.set(secret("s1"), for: key("alice", .generic))
        let other = try f.reopen()
        #expect(try other.secret(for: key("alice", .generic)) == secret("s1"))
        try f.store.lock(allProcesses: true)
        #expect(throws: TokenStoreError.storeLocked) { _ = try other.secret(for: key("alice", .generic)) }
        #expect(other.isLocked && other.connection.activeEnvelope == nil)
        // A local unlock does not lift a lock recorded for every process.
        #expect(throws: TokenStoreError.storeLocked) { try other.unlock() }
        #expect(throws: TokenStoreError.storeLocked) { _ = try other.secret(for: key("alice", .generic)) }
        // A store opened while it is locked everywhere opens locked.
        let third = try f.reopen()
        #expect(third.isLocked)
        #expect(throws: TokenStoreError.storeLocked) { _ = try third.secret(for: key("alice", .generic)) }
        try other.unlock(allProcesses: true)
        #expect(try other.secret(for: key("alice", .generic)) == secret("s1"))
        #expect(try third.secret(for: key("alice", .generic)) == secret("s1"))
        #expect(try f.store.secret(for: key("alice", .generic)) == secret("s1"))
        #expect(try record(f.path).1 == 0)
    }

    @Test("two processes: tokenctl lock makes this process's next read storeLocked; tokenctl unlock lets it read again")
    func tokenctlLockReachesAnotherProcess() throws {
        let f = try TestStore()
        try f.store.set(secret("s1"), for: key("alice", .generic))
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let env = ["DBUS_SESSION_BUS_ADDRESS": ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""]
        let lock = try runChild(tokenctl, ["--store", f.path, "--json", "lock"], environment: env)
        #expect(lock.status == 0, "\(lock.stderr)")
        #expect(lock.stdout.contains("\"locked\":true") || lock.stdout.contains("\"locked\": true"), "\(lock.stdout)")
        #expect(throws: TokenStoreError.storeLocked) { _ = try f.store.secret(for: key("alice", .generic)) }
        #expect(f.store.connection.activeEnvelope == nil, "the key is still in this process after the lock")
        let status = try runChild(tokenctl, ["--store", f.path, "--json", "status"], environment: env)
        #expect(status.stdout.contains("\"locked\":true") || status.stdout.contains("\"locked\": true"), "\(status.stdout)")
        // A read by another process of a locked store fails with exit 75.
        let get = try runChild(tokenctl, ["--store", f.path, "get", "--account", "alice", "--kind", "generic"], environment: env)
        #expect(get.status == 75 && get.stderr.contains("storeLocked"), "\(get.status) \(get.stderr)")
        let unlock = try runChild(tokenctl, ["--store", f.path, "--json", "unlock"], environment: env)
        #expect(unlock.status == 0, "\(unlock.stderr)")
        #expect(unlock.stdout.contains("storeUnlocked"), "\(unlock.stdout)")
        #expect(try f.store.secret(for: key("alice", .generic)) == secret("s1"))
    }

    @Test("tokenctl --access-policy and policy set: unknown names are usage errors; an unenforceable policy exits 69, nothing changed")
    func tokenctlPolicy() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let env = ["DBUS_SESSION_BUS_ADDRESS": ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""]
        func run(_ arguments: [String], stdin: String? = nil) throws -> ChildResult {
            try runChild(tokenctl, ["--store", path] + arguments, environment: env, stdin: stdin.map { Data($0.utf8) })
        }
        let put = ["put", "--account", "alice", "--kind", "generic"]
        #expect(try run(put + ["--access-policy", "sometimes"], stdin: "s1").status == 64)
        #expect(try run(put + ["--access-policy", "afterFirstUnlock"], stdin: "s1").status == 0)
        let before = try record(path)
        #expect(before.0 == "afterFirstUnlock")
        let stronger = try run(put + ["--access-policy", "whenUnlocked"], stdin: "s2")
        #expect(stronger.status == 69 && stronger.stderr.contains("lockSourceUnavailable"), "\(stronger.stderr)")
        let set = try run(["policy", "set", "whenUnlocked"])
        #expect(set.status == 69 && set.stderr.contains("lockSourceUnavailable"), "\(set.stderr)")
        #expect(try run(["policy", "set", "userPresence:session:0"]).status == 64)
        #expect(try run(["policy", "get", "afterFirstUnlock"]).status == 64)
        #expect(try record(path) == before, "a refused policy changed the record")
        #expect(try run(["policy", "set", "afterFirstUnlock"]).status == 0)
        let get = try run(["get", "--account", "alice", "--kind", "generic", "--reveal"])
        #expect(get.status == 0 && get.stdout.contains("s1"), "\(get.stderr)")
        // userPresence is recorded; with no polkit on this test's system bus (scripts/with-keyring
        // names one that is not there), a gated read is lockSourceUnavailable (69), and so is
        // lowering the policy (which needs the user's presence too).
        #expect(try run(["policy", "set", "userPresence:session:300"]).status == 0)
        #expect(try record(path).0 == "userPresence:session:300")
        let gated = try run(["get", "--account", "alice", "--kind", "generic"])
        #expect(gated.status == 69 && gated.stderr.contains("lockSourceUnavailable"), "\(gated.status) \(gated.stderr)")
        let lower = try run(["policy", "set", "afterFirstUnlock"])
        #expect(lower.status == 69 && lower.stderr.contains("lockSourceUnavailable"), "\(lower.status) \(lower.stderr)")
        #expect(try record(path).0 == "userPresence:session:300")
    }
}

extension AccessPolicyTests {
    @Test("lockAfterIdle: idle for that long, the object locks by itself (key wiped without a call); calls keep it open")
    func idleLock() throws {
        let f = try TestStore()
        try f.store.set(secret("s1"), for: key("alice", .generic))
        f.store.close()
        var options = TokenStore.Options()
        options.lockAfterIdle = .milliseconds(300)
        let store = try TokenStore(path: f.path, appID: testAppID, options: options)
        for _ in 0..<5 {  // 500 ms of calls every 100 ms: never idle for 300 ms
            #expect(try store.secret(for: key("alice", .generic)) == secret("s1"))
            usleep(100_000)
        }
        #expect(!store.isLocked)
        usleep(800_000)
        #expect(store.isLocked && store.connection.activeEnvelope == nil, "not locked after 800 ms idle")
        #expect(throws: TokenStoreError.storeLocked) { _ = try store.secret(for: key("alice", .generic)) }
        try store.unlock()
        #expect(try store.secret(for: key("alice", .generic)) == secret("s1"))
    }
}
