import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Review finding 12: with another connection holding a read transaction, a logout stalled
/// for the whole busy timeout (~5 s) in `wal_checkpoint(TRUNCATE)` and returned with the
/// logged-out account's sealed blobs still in the database file and the -wal. Now the
/// checkpoint never waits, is counted as owed, and the next write or open finishes it.
@Suite("Reliability: checkpoint held back by a reader", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct HeldCheckpointTests {
    /// Alice's and Bob's sign-ins (two accounts: logging Alice out leaves secrets, so no
    /// crypto-erase rotation runs), and Alice's sealed blobs as they are in the file.
    static func twoAccounts() throws -> (TestStore, [[UInt8]]) {
        let t = try TestStore()
        for name in ["alice", "bob"] {
            try t.store.ledger.saveSignIn(
                account: AccountID(name), refreshToken: secret("\(name)-rt"), appleUserID: "\(name)-user",
                accessToken: AccessTokenEntry(token: secret("\(name)-at"), expiresAt: Date() + 3600, scopes: ["read"]))
        }
        let aliceRef = t.store.connection.envelope.accountRef(AccountID("alice"))
        let raw = try t.rawDatabase()
        var blobs: [[UInt8]] = []
        for table in ["items", "access_tokens"] {
            try raw.forEachRow("SELECT sealed FROM \(table) WHERE account_ref = ?", [.blob(aliceRef)]) { blobs.append($0.blob(0)) }
        }
        #expect(blobs.count == 3, "refresh token, Apple user id, access token")
        return (t, blobs)
    }

    /// Logs Alice out (outbox, then a revocation the server confirmed) while `reader` holds a
    /// read transaction; returns the seconds it took.
    static func logOutAlice(_ store: TokenStore) throws -> Double {
        let start = Date()
        guard case .queued(let entries) = try store.ledger.beginLogout(account: "alice"), let entry = entries.first else {
            Issue.record("alice's refresh token was not queued")
            return 0
        }
        try store.ledger.recordRevocationAttempt(entry, result: .revoked)
        return Date().timeIntervalSince(start)
    }

    static func leftovers(_ t: TestStore, _ blobs: [[UInt8]]) -> Int {
        let files = t.fileBytes().values
        return blobs.filter { blob in files.contains { $0.range(of: Data(blob)) != nil } }.count
    }

    @Test("the logout does not wait for a reader; the next write finishes the checkpoint and no blob is left")
    func nextWriteFinishesTheCheckpoint() throws {
        let (t, blobs) = try Self.twoAccounts()
        let reader = try t.rawDatabase()
        try reader.execute("BEGIN")
        _ = try reader.scalarInt("SELECT count(*) FROM items")  // the read snapshot starts here

        let seconds = try Self.logOutAlice(t.store)
        #expect(seconds < 3, "the logout took \(seconds) s (busy timeout: 5 s)")
        #expect(try t.store.connection.checkpointsOwed() > 0)

        try reader.execute("COMMIT")
        try t.store.set(secret("later"), for: key("bob", .generic))  // the next write
        #expect(try t.store.connection.checkpointsOwed() == 0)
        #expect(Self.leftovers(t, blobs) == 0, "Alice's sealed blobs left in the db or -wal")
        #expect(try t.store.refreshToken(account: "bob") == secret("bob-rt"))
    }

    @Test("a checkpoint still owed when the store closed is finished by the next open")
    func nextOpenFinishesTheCheckpoint() throws {
        let (t, blobs) = try Self.twoAccounts()
        let reader = try t.rawDatabase()
        try reader.execute("BEGIN")
        _ = try reader.scalarInt("SELECT count(*) FROM items")

        let seconds = try Self.logOutAlice(t.store)
        #expect(seconds < 3, "the logout took \(seconds) s (busy timeout: 5 s)")
        t.store.close()  // the reader's connection stays open: this close checkpoints nothing
        try reader.execute("COMMIT")

        let reopened = try t.reopen()
        #expect(try reopened.connection.checkpointsOwed() == 0)
        #expect(Self.leftovers(t, blobs) == 0, "Alice's sealed blobs left in the db or -wal")
        withExtendedLifetime(reader) {}
    }

    @Test("a pending revocation given up on does not leave its sealed refresh token in the db or -wal")
    func discardedRevocationLeavesNoBlob() throws {
        let (t, blobs) = try Self.twoAccounts()
        guard case .queued(let entries) = try t.store.ledger.beginLogout(account: "alice"), let entry = entries.first else {
            Issue.record("alice's refresh token was not queued")
            return
        }
        let aliceRef = t.store.connection.envelope.accountRef(AccountID("alice"))
        var queued: [[UInt8]] = []
        try t.rawDatabase().forEachRow("SELECT sealed FROM pending_revocations WHERE account_ref = ?", [.blob(aliceRef)]) {
            queued.append($0.blob(0))
        }
        #expect(queued.count == 1)
        #expect(Self.leftovers(t, queued) == 1, "the queued token is in the files before the discard")

        try t.store.ledger.discardPendingRevocation(entry)
        #expect(try t.store.connection.checkpointsOwed() == 0)
        #expect(Self.leftovers(t, queued + blobs) == 0, "Alice's sealed blobs left in the db or -wal after the discard")
        #expect(try t.store.refreshToken(account: "bob") == secret("bob-rt"))
    }
}
