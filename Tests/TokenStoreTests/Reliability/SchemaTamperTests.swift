import CSQLite
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Review finding 1: a trigger planted in the file (`BEFORE INSERT ON pending_revocations …
/// RAISE(IGNORE)`) made a logout drop the refresh token without queueing it, so it was never
/// revoked, while the logout still reported success. Tampering needs write access to the file
/// but not the key. Before the fix the store opened such a file, the trigger ran, and
/// `verify` called the store healthy.
@Suite("Reliability: planted schema objects", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SchemaTamperTests {
    static let ignoreOutboxInserts =
        "CREATE TRIGGER t BEFORE INSERT ON pending_revocations BEGIN SELECT RAISE(IGNORE); END"

    /// Counts of the rows a logout would move or delete, read around the store.
    static func rowCounts(_ path: String) throws -> [String: Int64] {
        let raw = try Database(path: path)
        var counts: [String: Int64] = [:]
        for table in ["items", "pending_revocations", "access_tokens", "account_marks"] {
            counts[table] = try raw.scalarInt("SELECT count(*) FROM \(table)")
        }
        return counts
    }

    @Test("a store with a planted trigger does not open (schemaTampered); nothing is deleted, nothing revoked")
    func plantedTriggerRefusesTheOpen() throws {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("alice-rt"), appleUserID: "alice-user",
            accessToken: AccessTokenEntry(token: secret("alice-at"), expiresAt: Date() + 3600, scopes: ["read"]))
        t.store.close()
        try t.rawDatabase().execute(Self.ignoreOutboxInserts)
        let before = try Self.rowCounts(t.path)

        // The logout cannot begin: the open that precedes it fails, typed.
        #expect(throws: TokenStoreError.schemaTampered) { _ = try t.reopen() }
        let after = try Self.rowCounts(t.path)
        #expect(after == before, "nothing was moved or deleted")
        #expect(after["items"] == 2 && after["pending_revocations"] == 0, "\(after)")
    }

    @Test("every kind of planted or changed object is refused: trigger, view, index, table, changed table")
    func everyPlantedObjectIsRefused() throws {
        let plants = [
            Self.ignoreOutboxInserts,
            "CREATE VIEW v AS SELECT 1",
            "CREATE INDEX items_extra ON items(updated_at)",
            "CREATE TABLE extra(x)",
            "DROP INDEX items_by_account",
            "ALTER TABLE items ADD COLUMN extra TEXT",
        ]
        for plant in plants {
            let t = try TestStore()
            try t.store.set(secret("s"), for: key("alice", .generic))
            t.store.close()
            try t.rawDatabase().execute(plant)
            #expect(throws: TokenStoreError.schemaTampered, "\(plant)") { _ = try t.reopen() }
        }
        // An untouched store opens (the expected schema matches one made by the migrations).
        let clean = try TestStore()
        clean.store.close()
        _ = try clean.reopen()
    }

    /// With the store already open (the schema check passed), another connection plants the
    /// trigger: triggers are off on the store's connection, so it cannot fire, the refresh
    /// token reaches the outbox, and `verify` reports the planted trigger.
    @Test("a trigger planted while the store is open cannot fire, and verify reports it")
    func plantedTriggerCannotFire() throws {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("alice-rt"), appleUserID: "alice-user", accessToken: nil)
        try t.rawDatabase().execute(Self.ignoreOutboxInserts)

        guard case .queued(let entries) = try t.store.ledger.beginLogout(account: "alice") else {
            Issue.record("the refresh token did not reach the outbox")
            return
        }
        #expect(entries.count == 1)
        #expect(try t.store.pendingRevocations().count == 1)
        let report = try t.store.verify()
        #expect(!report.isHealthy)
        #expect(report.schemaDifferences == ["unexpected trigger 't' on 'pending_revocations'"], "\(report.schemaDifferences)")

        // Read back from SQLite itself: triggers and views are off on every store connection.
        let flags = try t.store.connection.withDatabase { db throws -> [Bool] in
            [try db.configFlag(SQLITE_DBCONFIG_ENABLE_TRIGGER), try db.configFlag(SQLITE_DBCONFIG_ENABLE_VIEW),
             try db.configFlag(SQLITE_DBCONFIG_DEFENSIVE)]
        }
        #expect(flags == [false, false, true], "trigger, view, defensive")
    }

    /// The control: on a plain SQLite connection the same trigger does fire (so the test above
    /// would fail without the connection setting), and on ours it does not; a view cannot be read.
    @Test("the planted trigger fires on a default connection, not on the store's")
    func triggerFiresOnlyWithoutTheSetting() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("scratch.sqlite").path
        let ours = try Database(path: path)
        try ours.execute("CREATE TABLE t(x); CREATE TRIGGER ig BEFORE INSERT ON t BEGIN SELECT RAISE(IGNORE); END; CREATE VIEW v AS SELECT 1")
        try ours.run("INSERT INTO t VALUES (1)")
        #expect(try ours.scalarInt("SELECT count(*) FROM t") == 1, "the trigger did not fire on the store's connection")
        #expect(throws: TokenStoreError.self) { _ = try ours.scalarInt("SELECT count(*) FROM v") }

        var plain: OpaquePointer?
        #expect(sqlite3_open_v2(path, &plain, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
        defer { sqlite3_close_v2(plain) }
        #expect(sqlite3_exec(plain, "INSERT INTO t VALUES (2)", nil, nil, nil) == SQLITE_OK)
        #expect(try ours.scalarInt("SELECT count(*) FROM t") == 1, "the trigger fired on the default connection")
    }
}
