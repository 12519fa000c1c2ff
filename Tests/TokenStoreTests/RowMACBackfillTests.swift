import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Issue 24 item 8 (review N11): a MAC stripped to NULL passed as a "legacy" row from before
/// schema 7: `verify` called the store healthy and `pending` showed forged values. Schema
/// version 10 is applied by an open that holds the key and gives every legacy row its MAC in the
/// same transaction; from then on a NULL MAC is tampering.
@Suite("Row MACs complete from schema version 10", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RowMACBackfillTests {
    let gina = "000666.gina"

    /// A store kept at schema version 9 (what a library before issue 24 left).
    private func versionNineStore(_ path: String) throws -> TokenStore {
        try TokenStore(
            path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled,
            options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(9))))
    }

    private func nullMACs(_ db: Database) throws -> Int64 {
        var total: Int64 = 0
        for table in ["pending_revocations", "account_marks", "credential_history"] {
            total += try db.scalarInt("SELECT count(*) FROM \(table) WHERE mac IS NULL") ?? 0
        }
        return total
    }

    @Test("the review's experiment: MAC stripped and schedule forged after an offline logout → unreadable, verify reports it")
    func reviewExperiment() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("RT-STRIP"), appleUserID: gina, accessToken: nil)
        guard case .queued(let entries) = try t.store.ledger.beginLogout(account: "alice"), let entry = entries.first else {
            Issue.record("the logout queued nothing")
            return
        }
        #expect(try t.store.schemaVersion() == TokenStore.supportedSchemaVersion)
        t.store.close()
        try t.rawDatabase().run(
            "UPDATE pending_revocations SET mac = NULL, failed_code = 'invalidClient', last_error = 'forged', attempts = 99")

        // The next open (it may write) does not launder it: the store is at version 10 already.
        let store = try t.reopen()
        let report = try store.verify()
        #expect(!report.isHealthy)
        let bad = report.badRows.filter { $0.table == "pending_revocations" }
        #expect(bad.count == 1 && bad.first?.reason.contains("lost its MAC") == true, "\(report.badRows)")
        let list = try store.ledger.pendingRevocationList()
        #expect(list.entries.isEmpty, "a row whose MAC was stripped was read as trusted")
        #expect(list.unreadable.map(\.id) == [entry.id])
        #expect(list.unreadable.allSatisfy { !$0.reason.contains("forged") && !$0.reason.contains("invalidClient") })
        #expect(throws: TokenStoreError.integrityCheckFailed) { try store.pendingRevocations() }
        #expect(try nullMACs(t.rawDatabase()) == 1)

        // The same for a logout mark and a history row.
        try t.rawDatabase().run("UPDATE account_marks SET mac = NULL")
        try t.rawDatabase().run("UPDATE credential_history SET mac = NULL WHERE id = (SELECT min(id) FROM credential_history)")
        let tables = Set(try store.verify().badRows.map(\.table))
        #expect(tables == ["pending_revocations", "account_marks", "credential_history"], "\(tables)")
        #expect(throws: TokenStoreError.integrityCheckFailed) { try store.credentialStateHistory(forUserID: gina) }
        #expect(try store.ledger.cachedAccessTokens(account: "alice").isEmpty, "a stripped mark is read fail-safe")
    }

    @Test("a store left at version 9 with legacy rows: the first open gets every MAC (neutral schedule, chain and head) and verifies clean")
    func legacyStoreIsBackfilled() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let old = try versionNineStore(path)
        let storeID = old.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try old.ledger.saveSignIn(account: "alice", refreshToken: secret("RT-LEGACY"), appleUserID: gina, accessToken: nil)
        _ = try old.ledger.beginLogout(account: "alice")
        try old.recordCredentialState(.authorized, forUserID: "000777.hal", reason: .signIn)
        try makeRowsLegacy(old)
        // Clear columns a library of those days left (never authenticated).
        try Database(path: path).run("UPDATE pending_revocations SET attempts = 7, last_error = 'old', failed_code = 'x'")
        // An authenticated row after hal's legacy one: the chain is re-MACed and the head resealed.
        try old.recordCredentialState(.revoked, forUserID: "000777.hal", reason: .appleRevoked)
        #expect(try old.verify().isHealthy, "legacy rows below version 10 are not problems")
        #expect(try nullMACs(Database(path: path)) == 4)
        #expect(try TokenStore.inspect(path: path).keyProvider == nil)
        old.close()

        let store = try TokenStore(path: path, appID: testAppID)
        #expect(try store.schemaVersion() == TokenStore.supportedSchemaVersion)
        #expect(try nullMACs(Database(path: path)) == 0)
        #expect(try store.verify().isHealthy)
        let entry = try #require(try store.ledger.pendingRevocationList().entries.first)
        #expect(entry.attempts == 0 && entry.failureCode == nil && entry.lastError == nil && entry.nextAttemptAt <= Date() + 1)
        #expect(try store.credentialStateHistory(forUserID: gina).map(\.to) == [.authorized])
        #expect(try store.credentialStateHistory(forUserID: "000777.hal").map(\.to) == [.authorized, .revoked])
        #expect(try TokenStore.inspect(path: path).keyProvider == .secretService)
        // From now on the rows are authenticated: the last history row, deleted, is caught.
        try Database(path: path).run(
            "DELETE FROM credential_history WHERE id = (SELECT max(id) FROM credential_history WHERE to_state = 'revoked' AND reason = 'appleRevoked')")
        #expect(throws: TokenStoreError.integrityCheckFailed) { try store.credentialStateHistory(forUserID: "000777.hal") }
    }

    @Test("a legacy chain that does not check (a stripped row after an authenticated one) is not laundered by the upgrade")
    func brokenChainIsNotBackfilled() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let old = try versionNineStore(path)
        let storeID = old.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        for reason in [CredentialStateReason.signIn, .appleRevoked] {
            try old.recordCredentialState(reason == .signIn ? .authorized : .revoked, forUserID: gina, reason: reason)
        }
        old.close()
        try Database(path: path).run("UPDATE credential_history SET mac = NULL, reason = 'forged' WHERE id = (SELECT max(id) FROM credential_history)")
        let store = try TokenStore(path: path, appID: testAppID)
        #expect(try Database(path: path).scalarInt("SELECT count(*) FROM credential_history WHERE mac IS NULL") == 1)
        let bad = try store.verify().badRows
        #expect(!bad.isEmpty && bad.allSatisfy { $0.table == "credential_history" }, "\(bad)")
        #expect(throws: TokenStoreError.integrityCheckFailed) { try store.credentialStateHistory(forUserID: gina) }
    }

    @Test("removing the version-10 fact (columns and ledger row) gains nothing: a stripped row comes back neutral, never trusted")
    func downgradeGainsNothing() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.set(secret("RT-DOWN"), for: key("alice"))
        _ = try t.store.ledger.beginLogout(account: "alice")
        t.store.close()
        let raw = try t.rawDatabase()
        try raw.run("UPDATE pending_revocations SET mac = NULL, failed_code = 'invalidClient', last_error = 'forged', attempts = 99")
        try raw.execute("ALTER TABLE store_info DROP COLUMN key_provider_mac")
        try raw.execute("ALTER TABLE store_info DROP COLUMN key_provider")
        try raw.run("DELETE FROM schema_migrations WHERE version = 10")
        do {
            let store = try t.reopen()
            let entries = try store.ledger.pendingRevocationList().entries
            #expect(entries.count == 1)
            #expect(entries.allSatisfy { $0.attempts == 0 && $0.failureCode == nil && $0.lastError == nil }, "forged values kept")
            #expect(try store.verify().isHealthy)
        } catch let error as TokenStoreError {
            // Refusing the rewritten schema is as good: nothing forged is read.
            #expect(error.code == .schemaTampered, "\(error)")
        }
    }
}
