import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

@Suite("Items", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ItemTests {
    @Test("every kind round-trips with its attributes")
    func roundTripEveryKind() throws {
        let t = try TestStore()
        // A profile item holds the profile JSON the session writes; any other kind any bytes.
        func value(_ kind: ItemKind) -> SecretBytes {
            kind == .profile ? secret(#"{"sub":"apple|value-profile","name":"N"}"#) : secret("value-\(kind.rawValue)")
        }
        let expiry = Date(timeIntervalSince1970: 2_000_000_000)
        for kind in ItemKind.allCases {
            let attributes = ItemAttributes(
                label: kind == .generic ? "Backup code" : nil,
                expiresAt: kind == .accessToken ? expiry : nil,
                scopes: kind == .accessToken ? ["openid", "read:items"] : [])
            try t.store.set(value(kind), for: key("alice", kind), attributes: attributes)
        }
        let reopened = try t.reopen()
        for kind in ItemKind.allCases {
            let item = try #require(try reopened.item(for: key("alice", kind)))
            #expect(item.secret == value(kind))
            #expect(item.key == key("alice", kind))
            if kind == .accessToken {
                #expect(item.attributes.expiresAt == expiry)
                #expect(item.attributes.scopes == ["openid", "read:items"])
            }
            if kind == .generic { #expect(item.attributes.label == "Backup code") }
        }
        #expect(try reopened.item(for: key("bob")) == nil)
    }

    @Test("a profile item that is not the profile JSON is invalidInput and stores nothing; a good one reads back")
    func profileItemIsChecked() throws {
        let t = try TestStore()
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(secret("not json"), for: key("alice", .profile)) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(secret(#"{"name":"no sub"}"#), for: key("alice", .profile)) }
        #expect(try t.store.items().isEmpty)
        try t.store.set(secret(#"{"sub":"apple|000792.x","email":"e@x"}"#), for: key("alice", .profile))
        let profile = try #require(try t.store.userProfile(account: "alice"))
        #expect(profile.subject == "apple|000792.x" && profile.email == "e@x" && profile.name == nil && profile.userID == nil)
    }

    @Test("set is an upsert and keeps the creation time")
    func upsert() throws {
        let t = try TestStore()
        try t.store.set(secret("one"), for: key("alice"))
        let first = try #require(try t.store.item(for: key("alice")))
        Thread.sleep(forTimeInterval: 0.01)
        try t.store.set(secret("two"), for: key("alice"))
        let second = try #require(try t.store.item(for: key("alice")))
        #expect(second.secret.stringValue() == "two")
        #expect(second.createdAt == first.createdAt)
        #expect(second.updatedAt > first.updatedAt)
        #expect(try t.store.counts().items == 1)
    }

    @Test("delete succeeds when nothing is there")
    func deleteIdempotent() throws {
        let t = try TestStore()
        try t.store.set(secret("one"), for: key("alice"))
        try t.store.delete(key("alice"))
        try t.store.delete(key("alice"))
        try t.store.delete(key("nobody", .generic))
        #expect(try t.store.item(for: key("alice")) == nil)
    }

    @Test("services and accounts are separate namespaces")
    func namespaces() throws {
        let t = try TestStore()
        try t.store.set(secret("a"), for: key("alice", service: "s1"))
        try t.store.set(secret("b"), for: key("alice", service: "s2"))
        try t.store.set(secret("c"), for: key("alice2", service: "s1"))
        #expect(try t.store.secret(for: key("alice", service: "s1"))?.stringValue() == "a")
        #expect(try t.store.secret(for: key("alice", service: "s2"))?.stringValue() == "b")
        #expect(try t.store.secret(for: key("alice2", service: "s1"))?.stringValue() == "c")
    }

    @Test("listing shows metadata and fingerprints, never a secret")
    func listShowsNoSecret() throws {
        let t = try TestStore()
        let canary = "CANARY-\(UUID().uuidString)"
        try t.store.set(secret(canary), for: key("alice"))
        try t.store.set(secret("other"), for: key("bob", .generic), attributes: .init(label: "label"))
        let items = try t.store.items()
        #expect(items.count == 2)
        let text = "\(items) \(try t.store.accounts())"
        #expect(!text.contains(canary))
        let alice = try #require(items.first { $0.key.account == "alice" })
        #expect(alice.fingerprint == t.store.fingerprint(of: secret(canary)))
        #expect(alice.byteCount == canary.utf8.count)
        #expect(try t.store.accounts().map(\.account) == ["alice", "bob"])
    }

    @Test("a secret's description is a redacted fingerprint")
    func secretDescription() {
        let canary = "CANARY-\(UUID().uuidString)"
        let value = secret(canary)
        #expect(!String(describing: value).contains(canary))
        #expect(!String(reflecting: value).contains(canary))
        #expect(String(describing: value).contains(value.fingerprint))
        #expect(value == secret(canary))
        #expect(value != secret(canary + "x"))
    }

    @Test("secrets round-trip at every guarded-memory size boundary")
    func guardedMemoryBoundaries() throws {
        let t = try TestStore()
        for size in [1, 63, 64, 65, 127, 128, 129, 1_023, 1_024, 1_025, 4_095, 4_096, 4_097, 65_536] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ size) }
            let value = SecretBytes(bytes)
            #expect(value.copyBytes() == bytes, "size \(size)")
            try t.store.set(value, for: key("size-\(size)", .generic))
            #expect(try t.store.secret(for: key("size-\(size)", .generic))?.copyBytes() == bytes, "size \(size)")
        }
        // Released slots are wiped and reused: a new secret never shows an old one's bytes.
        var seen: [[UInt8]] = []
        for round in 0..<64 {
            let bytes = [UInt8](repeating: UInt8(round), count: 100)
            seen.append(SecretBytes(bytes).copyBytes())
        }
        #expect(seen.enumerated().allSatisfy { index, bytes in bytes == [UInt8](repeating: UInt8(index), count: 100) })
    }

    @Test("bad input is refused with invalidInput and writes nothing")
    func invalidInput() throws {
        let t = try TestStore()
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(secret("x"), for: key("")) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(SecretBytes([UInt8]()), for: key("alice")) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(secret("x"), for: key(String(repeating: "a", count: 10_240))) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.set(SecretBytes([UInt8](repeating: 1, count: (1 << 20) + 1)), for: key("alice")) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.recordCredentialState(.revoked, forUserID: "u", reason: .init(rawValue: "has space")) }
        #expect(try t.store.counts().items == 0)
    }

    @Test("edge-case identifiers and secrets round-trip exactly")
    func edgeCases() throws {
        let t = try TestStore()
        let accounts = ["'\";--", "%", "_", "a\u{0}b", "ünïcødé 🙂", String(repeating: "x", count: 4_096)]
        for (index, account) in accounts.enumerated() {
            let bytes = (0..<(index * 997 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31) } + [0, 0xff, 0xc3]
            try t.store.set(SecretBytes(bytes), for: key(account, .generic))
            #expect(try t.store.secret(for: key(account, .generic))?.copyBytes() == bytes)
        }
        let big = [UInt8](repeating: 0xab, count: 1 << 20)
        try t.store.set(SecretBytes(big), for: key("big", .generic))
        #expect(try t.store.secret(for: key("big", .generic))?.copyBytes() == big)
        #expect(try t.store.items().count == accounts.count + 1)
    }

    @Test("calling the store from inside forEachItem is invalidInput, not a deadlock; keyIdentifier still answers")
    func callFromInsideACallback() throws {
        // Found in review: `forEachItem { try store.delete($0.key) }` hung its thread for good.
        let t = try TestStore()
        for n in 0..<3 { try t.store.set(secret("s\(n)"), for: key("user\(n)")) }
        final class Seen: @unchecked Sendable {  // written by the worker thread before `done` is signalled
            var errors: [TokenStoreError.Code?] = []
            var keyIDs: [String] = []
        }
        let seen = Seen()
        let done = DispatchSemaphore(value: 0)
        let store = t.store
        Thread {
            try? store.forEachItem { item in
                do {
                    try store.delete(item.key)
                    seen.errors.append(nil)
                } catch {
                    seen.errors.append((error as? TokenStoreError)?.code)
                }
                seen.keyIDs.append(store.keyIdentifier)
            }
            done.signal()
        }.start()
        try #require(done.wait(timeout: .now() + 30) == .success, "the call from inside the callback deadlocked")
        #expect(seen.errors == [.invalidInput, .invalidInput, .invalidInput])
        #expect(seen.keyIDs == Array(repeating: store.keyIdentifier, count: 3))
        // Nothing was deleted, and the store works once the call has returned.
        #expect(try store.items().count == 3)
        try store.delete(key("user0"))
        #expect(try store.items().count == 2)
    }
}
