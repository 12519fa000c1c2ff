import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// A look-up (`secret`, `item`, `credentialState`, a cached access token) runs first with the
/// key in hand and keeps its result only when SQLite's pager data version says nothing committed
/// to the file since the key was last confirmed (`StoreConnection.readRepeatable`). Two store
/// objects on one file (two connections, as two processes have) against the real Secret Service:
/// whatever the other one commits, the next look-up sees it.
@Suite("A look-up with the key in hand sees another object's commits", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RepeatableReadTests {
    @Test("another object rotates the key: the next look-up follows it, every time")
    func followsAnotherObjectsRotation() throws {
        let f = try TestStore()
        let other = try f.reopen()
        let k = key("alice", .generic)
        try f.store.set(secret("s1"), for: k)
        for round in 0..<3 {
            #expect(try f.store.secret(for: k) == secret("s1"))  // confirms the key in hand
            #expect(try f.store.secret(for: k) == secret("s1"))  // the look-up with it
            _ = try other.rotateDataKey()
            #expect(try f.store.secret(for: k) == secret("s1"), "round \(round)")
            #expect(f.store.keyIdentifier == other.keyIdentifier, "round \(round)")
        }
    }

    @Test("another object locks every process: the next look-up is storeLocked; unlocked, it reads again")
    func seesALockSetElsewhere() throws {
        let f = try TestStore()
        let other = try f.reopen()
        let k = key("alice", .generic)
        try f.store.set(secret("s1"), for: k)
        #expect(try f.store.secret(for: k) == secret("s1"))
        #expect(try f.store.credentialState(forUserID: "user-1") == .notFound)
        try other.lock(allProcesses: true)
        #expect(throws: TokenStoreError.storeLocked) { _ = try f.store.secret(for: k) }
        #expect(throws: TokenStoreError.storeLocked) { _ = try f.store.credentialState(forUserID: "user-1") }
        try other.unlock(allProcesses: true)
        #expect(try f.store.secret(for: k) == secret("s1"))
    }

    @Test("writes by either object: each look-up returns the value last committed")
    func seesEveryCommit() throws {
        let f = try TestStore()
        let other = try f.reopen()
        let k = key("alice", .generic)
        for round in 0..<5 {
            try f.store.set(secret("mine-\(round)"), for: k)
            #expect(try other.secret(for: k) == secret("mine-\(round)"))
            #expect(try f.store.secret(for: k) == secret("mine-\(round)"))
            try other.set(secret("theirs-\(round)"), for: k)
            #expect(try f.store.secret(for: k) == secret("theirs-\(round)"))
            #expect(try f.store.item(for: k)?.secret == secret("theirs-\(round)"))
            try other.delete(k)
            #expect(try f.store.secret(for: k) == nil)
        }
    }
}
