import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// After-commit work (`Database.afterCommit`, GRDB's `afterNextTransaction(onCommit:)`): it runs
/// once the transaction that registered it has committed, in order, never after a rollback; a
/// transaction that reports an epoch-raising change without registering the epoch's
/// publication is refused. The first tests use a plain SQLite file (no key is needed); the
/// last drives a real store and the real Secret Service.
@Suite("After-commit hooks", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct CommitHookTests {
    /// A fresh SQLite file with one table.
    func database(_ directory: TemporaryDirectory) throws -> Database {
        let db = try Database(path: directory.appending("hooks.sqlite").path)
        try db.run("CREATE TABLE t(x INTEGER)")
        return db
    }

    final class Log: @unchecked Sendable {  // touched on the test's thread only
        var lines: [String] = []
    }

    @Test("a hook runs after the commit, outside the transaction, seeing the change, once and in order")
    func runsAfterCommit() throws {
        let directory = try TemporaryDirectory()
        let db = try database(directory)
        let log = Log()
        try db.writeTransaction {
            try db.run("INSERT INTO t VALUES (1)")
            db.afterCommit { db in
                let rows = (try? db.scalarInt("SELECT count(*) FROM t")) ?? nil
                log.lines.append("first inTransaction=\(db.isInTransaction) rows=\(rows ?? -1)")
            }
            db.afterCommit { _ in log.lines.append("second") }
            #expect(log.lines.isEmpty, "a hook ran before the commit")
        }
        #expect(log.lines == ["first inTransaction=false rows=1", "second"])
        // The next transaction does not run them again.
        try db.writeTransaction { try db.run("INSERT INTO t VALUES (2)") }
        #expect(log.lines.count == 2)
    }

    @Test("a rollback drops the hooks: they never run, not even after the next commit")
    func droppedByRollback() throws {
        let directory = try TemporaryDirectory()
        let db = try database(directory)
        let log = Log()
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try db.writeTransaction {
                try db.run("INSERT INTO t VALUES (1)")
                db.afterCommit { _ in log.lines.append("rolled back") }
                throw Stop()
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 0)
        try db.writeTransaction {
            try db.run("INSERT INTO t VALUES (2)")
            db.afterCommit { _ in log.lines.append("committed") }
        }
        #expect(log.lines == ["committed"])
    }

    @Test("a named hook asked for twice in one transaction runs once; asked in the next transaction, again")
    func namedHookRunsOnce() throws {
        let directory = try TemporaryDirectory()
        let db = try database(directory)
        let log = Log()
        for round in 1...2 {
            try db.writeTransaction {
                db.afterCommit(once: "checkpoint") { _ in log.lines.append("checkpoint \(round)") }
                db.afterCommit(once: "checkpoint") { _ in log.lines.append("again \(round)") }
            }
        }
        #expect(log.lines == ["checkpoint 1", "checkpoint 2"])
    }

    @Test("an epoch-raising change without the epoch's publication is refused, nothing written, no hook run; with it, it commits")
    func epochRaiseWithoutPublicationIsRefused() throws {
        let directory = try TemporaryDirectory()
        let db = try database(directory)
        let log = Log()
        for change in EpochRaisingChange.allCases {
            #expect(throws: TokenStoreError.ioError, "\(change)") {
                try db.writeTransaction {
                    try db.run("INSERT INTO t VALUES (1)")
                    db.afterCommit { _ in log.lines.append("refused \(change)") }
                    db.requireEpochRaise(change)
                }
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 0)
        #expect(log.lines.isEmpty)
        try db.writeTransaction {
            try db.run("INSERT INTO t VALUES (1)")
            db.requireEpochRaise(.outboxEntryQueued)
            db.afterCommit(publishingEpoch: { _ in log.lines.append("published") })
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)
        #expect(log.lines == ["published"])
    }

    @Test("through a store: an epoch-raising transaction that rolls back raises neither side; one that commits raises both", keyringTrait)
    func storeEpochFollowsTheCommit() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let before = try t.store.epochStatus()
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try t.store.connection.write { db, _ in
                db.requireEpochRaise(.localEntriesDeleted)
                throw Stop()
            }
        }
        #expect(try t.store.epochStatus() == before, "a rolled-back transaction raised the epoch")
        try t.store.connection.write { db, _ in db.requireEpochRaise(.localEntriesDeleted) }
        #expect(try t.store.epochStatus() == StoreEpochStatus(file: before.file + 1, keyProvider: before.keyProvider + 1))
    }
}
