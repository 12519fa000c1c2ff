import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Finding 4 of the security review: the outbox's schedule, the logout marks and the credential
/// history were clear columns nothing authenticated. Edited with raw SQL (no key), they stopped
/// or postponed a revocation, brought a logging-out account's cached tokens back, or rewrote
/// the history — and `verify` said ok. Each test below edits one field and failed before the fix
/// (the read succeeded with the edited value, `verify` reported no bad row).
@Suite("Row MACs over the outbox schedule, logout marks and credential history", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RowMACTests {
    /// A store where alice's logout has begun: her token is in the outbox, her mark set, her
    /// cached access token still stored (hidden by the mark).
    private func loggingOut() throws -> (TestStore, PendingRevocation) {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("rt-alice"), appleUserID: "000111.alice",
            accessToken: AccessTokenEntry(token: secret("at-alice"), expiresAt: Date() + 3600, scopes: ["read"]))
        guard case .queued(let entries) = try t.store.ledger.beginLogout(account: "alice"), let entry = entries.first else {
            throw TokenStoreError(.ioError, "the logout did not queue")
        }
        return (t, entry)
    }

    private func badTables(_ store: TokenStore) throws -> [String] {
        try store.verify().badRows.map(\.table)
    }

    @Test("each schedule column edited without the key: the entry does not open, verify reports it; put back, it opens")
    func outboxSchedule() throws {
        let (t, entry) = try loggingOut()
        let raw = try t.rawDatabase()
        let id = try #require(Hex.decode(entry.id))
        let edits: [(column: String, value: SQLValue)] = [
            ("failed_code", .text("invalidClient")), ("next_attempt_at", .int(Timestamp.nowMillis() + 86_400_000 * 365)),
            ("attempts", .int(40)), ("last_error", .text("forged")), ("created_at", .int(1)),
        ]
        #expect(try badTables(t.store).isEmpty)
        for edit in edits {
            let old = try #require(try raw.firstRow("SELECT \(edit.column) FROM pending_revocations WHERE entry_id = ?", [.blob(id)]) {
                $0.isNull(0) ? SQLValue.null : edit.value.isText ? .text($0.text(0)) : .int($0.int(0))
            })
            try raw.run("UPDATE pending_revocations SET \(edit.column) = ? WHERE entry_id = ?", [edit.value, .blob(id)])
            let list = try t.store.ledger.pendingRevocationList()
            #expect(list.entries.isEmpty && list.unreadable.map(\.id) == [entry.id], "\(edit.column) edit went unnoticed")
            #expect(throws: TokenStoreError.integrityCheckFailed) { try t.store.pendingRevocations() }
            #expect(try badTables(t.store) == ["pending_revocations"], "\(edit.column)")
            // A schedule update checks the stored MAC before it writes a new one.
            #expect(throws: TokenStoreError.integrityCheckFailed) {
                try t.store.ledger.recordRevocationAttempt(entry, result: .retryLater(error: "x", nextAttemptAt: Date()))
            }
            try raw.run("UPDATE pending_revocations SET \(edit.column) = ? WHERE entry_id = ?", [old, .blob(id)])
            #expect(try t.store.ledger.pendingRevocationList().entries.map(\.id) == [entry.id])
        }
        // A MAC copied from another entry does not fit this one.
        try t.store.set(secret("rt-bob"), for: key("bob"))
        _ = try t.store.ledger.beginLogout(account: "bob")
        try raw.run(
            "UPDATE pending_revocations SET mac = (SELECT mac FROM pending_revocations WHERE entry_id != ?1) WHERE entry_id = ?1",
            [.blob(id)])
        #expect(try t.store.ledger.pendingRevocationList().unreadable.map(\.id) == [entry.id])
    }

    // Issue 24 (N11) changed this test: a stripped MAC used to be read as a legacy row (neutral
    // schedule); from schema version 10 on every legacy row has its MAC, so a NULL is tampering.
    @Test("a MAC stripped to look like a legacy row: the entry is unreadable and reported, and writes are refused")
    func strippedOutboxMAC() throws {
        let (t, entry) = try loggingOut()
        let raw = try t.rawDatabase()
        try raw.run(
            "UPDATE pending_revocations SET mac = NULL, next_attempt_at = ? WHERE entry_id = ?",
            [.int(Timestamp.nowMillis() + 86_400_000 * 365), .blob(try #require(Hex.decode(entry.id)))])
        let list = try t.store.ledger.pendingRevocationList()
        #expect(list.entries.isEmpty)
        #expect(list.unreadable.map(\.id) == [entry.id])
        #expect(list.unreadable.first?.reason.contains("lost its MAC") == true)
        #expect(try badTables(t.store) == ["pending_revocations"])
        #expect(throws: TokenStoreError.integrityCheckFailed) {
            try t.store.ledger.recordRevocationAttempt(entry, result: .retryLater(error: "offline", nextAttemptAt: Date() + 60))
        }
        #expect(try raw.scalarInt("SELECT count(*) FROM pending_revocations WHERE mac IS NULL") == 1)
    }

    @Test("a logout mark edited without the key: read fail-safe (still logging out), verify reports it, the logout still finishes")
    func logoutMark() throws {
        let (t, entry) = try loggingOut()
        let raw = try t.rawDatabase()
        #expect(try t.store.ledger.cachedAccessTokens(account: "alice").isEmpty)
        for edit in ["logging_out = 0", "logout_entry = zeroblob(16)", "logout_entry = NULL", "mac = NULL, logging_out = 0"] {
            let saved = try #require(try raw.firstRow("SELECT logging_out, logout_entry, mac FROM account_marks") {
                ($0.int(0), $0.blob(1), $0.blob(2))
            })
            try raw.run("UPDATE account_marks SET \(edit)")
            #expect(try t.store.ledger.cachedAccessTokens(account: "alice").isEmpty, "\(edit) brought the cached token back")
            #expect(try t.store.ledger.hasRefreshToken(account: "alice") == false)
            if !edit.hasPrefix("mac = NULL") {
                #expect(try badTables(t.store) == ["account_marks"], "\(edit)")
            }
            try raw.run("UPDATE account_marks SET logging_out = ?, logout_entry = ?, mac = ?", [.int(saved.0), .blob(saved.1), .blob(saved.2)])
            #expect(try badTables(t.store).isEmpty)
        }
        // An entry id forged into the mark cannot keep the logout from finishing.
        try raw.run("UPDATE account_marks SET logout_entry = zeroblob(16)")
        try t.store.ledger.recordRevocationAttempt(entry, result: .revoked)
        #expect(try t.store.appleUserID(account: "alice") == nil)
        #expect(try t.store.credentialState(forUserID: "000111.alice") == .revoked)
        #expect(try raw.scalarInt("SELECT count(*) FROM account_marks") == 0)
    }

    @Test("credential history: an edited, forged, or deleted row (middle or last) fails the read and verify")
    func history() throws {
        let t = try TestStore()
        let user = "000222.carol"
        for (state, reason) in [(CredentialState.authorized, CredentialStateReason.signIn), (.revoked, .userLogout),
                                (.authorized, .signIn), (.revoked, .appleRevoked)] {
            try t.store.recordCredentialState(state, forUserID: user, reason: reason)
        }
        try t.store.recordCredentialState(.authorized, forUserID: "000333.dave", reason: .signIn)
        #expect(try t.store.credentialStateHistory(forUserID: user).count == 4)
        #expect(try badTables(t.store).isEmpty)
        let raw = try t.rawDatabase()
        let ids = try rows(raw, "SELECT id FROM credential_history ORDER BY id")
        let (second, last) = (ids[1], ids[3])

        func expectDetected(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(throws: TokenStoreError.integrityCheckFailed, "\(what)", sourceLocation: sourceLocation) {
                try t.store.credentialStateHistory(forUserID: user)
            }
            #expect(try badTables(t.store).contains("credential_history"), "\(what)", sourceLocation: sourceLocation)
            #expect(try t.store.credentialStateHistory(forUserID: "000333.dave").count == 1, "another user's history stays readable")
        }
        try withSnapshot(raw) {
            try raw.run("UPDATE credential_history SET reason = 'signIn' WHERE id = ?", [.int(second)])
            try expectDetected("edited middle row")
        }
        try withSnapshot(raw) {
            try raw.run("UPDATE credential_history SET detail = 'remoteRevocationPending' WHERE id = ?", [.int(last)])
            try expectDetected("edited last row")
        }
        try withSnapshot(raw) {
            try raw.run("DELETE FROM credential_history WHERE id = ?", [.int(second)])
            try expectDetected("deleted middle row")
        }
        try withSnapshot(raw) {
            // The last row deleted: the chain before it is intact, but the state's sealed head names it.
            try raw.run("DELETE FROM credential_history WHERE id = ?", [.int(last)])
            try expectDetected("deleted last row")
        }
        try withSnapshot(raw) {
            try raw.run(
                """
                INSERT INTO credential_history(user_ref, at, from_state, to_state, reason, detail, mac)
                SELECT user_ref, at + 1, 'revoked', 'revoked', 'revocationConfirmed', NULL, mac FROM credential_history WHERE id = ?
                """, [.int(last)])
            try expectDetected("forged row appended")
        }
        try withSnapshot(raw) {
            try raw.run("UPDATE credential_history SET mac = NULL WHERE user_ref = (SELECT user_ref FROM credential_history WHERE id = ?)", [.int(last)])
            try expectDetected("every MAC stripped")
        }
        #expect(try t.store.credentialStateHistory(forUserID: user).count == 4)
        #expect(try badTables(t.store).isEmpty)
    }

    @Test("key rotation re-MACs schedules, marks and chains: everything verifies and reads the same under the new key")
    func rotation() throws {
        let (t, entry) = try loggingOut()
        try t.store.ledger.recordRevocationAttempt(
            entry, result: .failedPermanently(code: "invalidClient", error: "x", nextAttemptAt: Date() + 3600))
        try t.store.set(secret("rt-bob"), for: key("bob"))
        try t.store.set(secret("000444.bob"), for: key("bob", .appleUserID))
        _ = try t.store.ledger.beginLogout(account: "bob")
        for n in 0..<3 { try t.store.recordCredentialState(n % 2 == 0 ? .authorized : .revoked, forUserID: "000555.erin", reason: .signIn) }
        // An unreadable entry discarded by id leaves a history row filed under its account hash.
        try t.store.set(secret("rt-frank"), for: key("frank"))
        _ = try t.store.ledger.beginLogout(account: "frank")
        let frank = try #require(try t.store.ledger.pendingRevocationList().entries.first { $0.account == "frank" })
        let raw = try t.rawDatabase()
        try raw.run("UPDATE pending_revocations SET attempts = 3 WHERE entry_id = ?", [.blob(try #require(Hex.decode(frank.id)))])
        #expect(try t.store.ledger.discardUnreadablePendingRevocation(id: frank.id))
        let before = try t.store.ledger.pendingRevocationList().entries.map { ($0.id, $0.attempts, $0.failureCode, $0.nextAttemptAt) }
        #expect(try badTables(t.store).isEmpty)

        try t.store.rotateDataKey(batchSize: 1)
        #expect(try badTables(t.store).isEmpty)
        let after = try t.store.ledger.pendingRevocationList()
        #expect(after.unreadable.isEmpty)
        #expect(after.entries.map { ($0.id, $0.attempts, $0.failureCode, $0.nextAttemptAt) }.elementsEqual(before) { $0 == $1 })
        #expect(try t.store.credentialStateHistory(forUserID: "000555.erin").count == 3)
        #expect(try t.store.credentialStateHistory(forUserID: "000111.alice").last?.detail == CredentialStateDetail.remoteRevocationFailed)
        #expect(try t.store.ledger.cachedAccessTokens(account: "bob").isEmpty)
        #expect(try raw.scalarInt("SELECT count(*) FROM account_marks WHERE mac IS NULL") == 0)

        // A history row tampered before a rotation stays reported after it (the rotation does
        // not launder it, nor is it blocked by it).
        try raw.run("UPDATE credential_history SET reason = 'forged' WHERE id = (SELECT min(id) FROM credential_history)")
        #expect(try badTables(t.store) == ["credential_history"])
        try t.store.rotateDataKey()
        #expect(try badTables(t.store) == ["credential_history"])
    }

    // Issue 24 (N11) changed this test: legacy rows exist only below schema version 10 (the
    // store is kept at version 9 for the first part); the upgrade gives them their MACs.
    @Test("rows left by a library before schema 7: below version 10 they read and verify clean; the upgrade MACs them")
    func legacyRows() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let old = try TokenStore(
            path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled,
            options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(9))))
        let storeID = old.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try old.ledger.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "000666.gina", accessToken: nil)
        _ = try old.ledger.beginLogout(account: "alice")
        try makeRowsLegacy(old)
        #expect(try old.verify().isHealthy)
        let entry = try #require(try old.ledger.pendingRevocationList().entries.first)
        #expect(try old.credentialStateHistory(forUserID: "000666.gina").count == 1)
        #expect(try old.ledger.cachedAccessTokens(account: "alice").isEmpty)
        old.close()
        let t = (path: path, store: try TokenStore(path: path, appID: testAppID))
        #expect(try t.store.schemaVersion() == TokenStore.supportedSchemaVersion)
        for table in ["pending_revocations", "account_marks", "credential_history"] {
            #expect(try Database(path: path).scalarInt("SELECT count(*) FROM \(table) WHERE mac IS NULL") == 0, "\(table)")
        }
        #expect(try t.store.verify().isHealthy)
        try t.store.ledger.recordRevocationAttempt(entry, result: .revoked)
        #expect(try t.store.appleUserID(account: "alice") == nil, "a legacy mark still finishes the logout")
        #expect(try t.store.credentialStateHistory(forUserID: "000666.gina").map(\.to) == [.authorized, .revoked])
        #expect(try t.store.verify().isHealthy)
        // The new row is chained and named by the state: deleting it is caught.
        try Database(path: path).run("DELETE FROM credential_history WHERE id = (SELECT max(id) FROM credential_history)")
        #expect(throws: TokenStoreError.integrityCheckFailed) { try t.store.credentialStateHistory(forUserID: "000666.gina") }
    }

    private func rows(_ db: Database, _ sql: String) throws -> [Int64] {
        var out: [Int64] = []
        try db.forEachRow(sql) { out.append($0.int(0)) }
        return out
    }

    /// Runs `body` and then puts `credential_history` back as it was.
    private func withSnapshot(_ raw: Database, _ body: () throws -> Void) throws {
        try raw.execute("CREATE TEMP TABLE saved AS SELECT * FROM credential_history")
        defer {
            do {
                try raw.execute("DELETE FROM credential_history; INSERT INTO credential_history SELECT * FROM saved; DROP TABLE saved")
            } catch {
                Issue.record("could not restore the history: \(error)")
            }
        }
        try body()
    }
}

/// Rewrites a store's rows as a library before schema 7 left them: no MACs, and credential
/// states sealed without the history head (exactly the user id and the state).
func makeRowsLegacy(_ store: TokenStore) throws {
    try store.connection.write { db, envelope in
        var states: [(ref: [UInt8], userID: String, state: String)] = []
        try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
            let fields = try envelope.open(row.blob(2), keyID: row.blob(1), kind: .credentialUser, rowKey: row.blob(0))
            states.append((row.blob(0), fields.string(.userID) ?? "", row.text(3)))
        }
        for state in states {
            var fields = RecordFields()
            fields.set(.userID, state.userID)
            fields.set(.credentialState, state.state)
            try db.run(
                "UPDATE credential_states SET sealed_user = ? WHERE user_ref = ?",
                [.blob(envelope.seal(fields, kind: .credentialUser, rowKey: state.ref)), .blob(state.ref)])
        }
        for table in ["pending_revocations", "account_marks", "credential_history"] {
            let hasMAC = try db.scalarInt("SELECT count(*) FROM pragma_table_info(?) WHERE name = 'mac'", [.text(table)]) ?? 0
            if hasMAC > 0 { try db.run("UPDATE \(table) SET mac = NULL") }
        }
    }
}

extension SQLValue {
    fileprivate var isText: Bool { if case .text = self { return true } else { return false } }
}
