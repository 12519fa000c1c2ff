import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

// Key management: rotation, crypto-erase, destroy, reset, the passphrase
// provider, locked keyrings and the missing Secret Service. Everything runs against the
// real gnome-keyring of scripts/with-keyring, real SQLite and real libsodium.

/// The first column of every row `sql` returns, as bytes.
private func blobs(_ db: Database, _ sql: String) throws -> [[UInt8]] {
    var found: [[UInt8]] = []
    try db.forEachRow(sql) { found.append($0.blob(0)) }
    return found
}

private func keyItems(_ storeID: String, keyID: String? = nil) throws -> Int {
    var attributes = ["store-id": storeID]
    if let keyID { attributes["key-id"] = keyID }
    return try PrivateKeyring.itemCount(attributes: attributes)
}

/// Every key id a sealed row or a key record of the raw database names.
private func referencedKeyIDs(_ db: Database) throws -> (rows: Set<String>, records: [String: String]) {
    var rows = Set<String>()
    for table in ["items", "pending_revocations", "credential_states"] {
        try db.forEachRow("SELECT DISTINCT key_id FROM \(table)") { rows.insert(Hex.encode($0.blob(0))) }
    }
    var records: [String: String] = [:]
    try db.forEachRow("SELECT key_id, status FROM data_keys") { records[Hex.encode($0.blob(0))] = $0.text(1) }
    return (rows, records)
}

/// Seeds `accounts` signed-in accounts (refresh token, Apple user id, state `authorized`)
/// in one transaction, and begins the logout of the first `loggingOut` of them (their
/// refresh tokens move to the outbox). Rows: 3 per account.
private func seed(_ store: TokenStore, accounts: Int, loggingOut: Int, extraOutbox: Int = 0) throws {
    try store.connection.write { db, envelope in
        for n in 0..<accounts {
            try ItemRecord.upsert(db, key("acct-\(n)"), secret: secret("rt-\(n)"), envelope: envelope)
            try ItemRecord.upsert(db, key("acct-\(n)", .appleUserID), secret: secret("user-\(n)"), envelope: envelope)
            try CredentialRecord.record(db, userID: "user-\(n)", to: .authorized, reason: .signIn, detail: nil, envelope: envelope)
        }
        for n in 0..<extraOutbox {
            try OutboxRecord.insert(
                db, AccountID("gone-\(n)"), appleUserID: "gone-user-\(n)",
                token: secret("old-rt-\(n)"), reason: .userLogout, endpoints: nil, envelope: envelope)
        }
    }
    for n in 0..<loggingOut { _ = try store.ledger.beginLogout(account: AccountID("acct-\(n)")) }
}

/// Checks every seeded account through the public API; returns the problems found.
private func checkSeeded(_ store: TokenStore, accounts: Int, loggingOut: Int, extraOutbox: Int = 0) throws -> [String] {
    var problems: [String] = []
    for n in 0..<accounts {
        let rt = try store.refreshToken(account: AccountID("acct-\(n)"))?.stringValue()
        if rt != (n < loggingOut ? nil : "rt-\(n)") { problems.append("refresh token of \(n)") }
        if try store.appleUserID(account: AccountID("acct-\(n)")) != "user-\(n)" { problems.append("user id of \(n)") }
        if try store.credentialState(forUserID: "user-\(n)") != .authorized { problems.append("state of \(n)") }
        if try store.credentialStateHistory(forUserID: "user-\(n)").count != 1 { problems.append("history of \(n)") }
        let loggingOutNow = try store.connection.read { db, envelope in
            try AccountMarks.isLoggingOut(db, AccountID("acct-\(n)"), envelope: envelope)
        }
        if loggingOutNow != (n < loggingOut) { problems.append("logout mark of \(n)") }
    }
    let pending = try store.pendingRevocations()
    let tokens = Set(pending.compactMap { $0.refreshToken.stringValue() })
    let expected = Set((0..<loggingOut).map { "rt-\($0)" } + (0..<extraOutbox).map { "old-rt-\($0)" })
    if tokens != expected { problems.append("outbox tokens (\(tokens.count) of \(expected.count))") }
    return problems
}

@Suite("Key management", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyManagementTests {
    @Test("rotation round trip on 10,000 rows: all readable, lookups and history work, one key left")
    func rotationRoundTrip() throws {
        let t = try TestStore()
        let store = t.store
        let storeID = store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        // 3,000 accounts × 3 rows, 10 of them logging out (token moved to the outbox), and
        // 1,000 further outbox entries: 10,000 sealed rows.
        try seed(store, accounts: 3_000, loggingOut: 10, extraOutbox: 1_000)
        #expect(try store.verify().rowsChecked == 10_000)
        let oldKey = store.keyIdentifier
        let other = try t.reopen()  // a second store object must follow the switch

        var calls: [(Int, Int)] = []
        let started = ContinuousClock.now
        let report = try store.rotateDataKey(batchSize: 500) { calls.append(($0, $1)) }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

        #expect(report.previousKeyIdentifier == oldKey)
        #expect(report.newKeyIdentifier == store.keyIdentifier)
        #expect(report.newKeyIdentifier != oldKey)
        #expect(report.rowsResealed == 10_000)
        #expect(report.batches == 12 + 3 + 6, "5,990 items, 1,010 outbox entries, 3,000 states in batches of 500")
        #expect(!report.resumed)
        #expect(calls.last.map { $0 == (10_000, 10_000) } == true)
        #expect(zip(calls, calls.dropFirst()).allSatisfy { $0.0 <= $1.0 && $0.1 == $1.1 }, "progress is monotonic")

        let verification = try store.verify()
        #expect(verification.isHealthy, "\(verification.badRows.prefix(3))")
        #expect(verification.rowsChecked == 10_000)
        #expect(try checkSeeded(store, accounts: 3_000, loggingOut: 10, extraOutbox: 1_000).isEmpty)
        #expect(try checkSeeded(other, accounts: 3_000, loggingOut: 10, extraOutbox: 1_000).isEmpty)
        #expect(other.keyIdentifier == report.newKeyIdentifier)
        #expect(try store.dataKeys().map(\.status) == [.active])
        #expect(try store.dataKeys().first?.identifier == report.newKeyIdentifier)
        let raw = try t.rawDatabase()
        for table in SealedTables.rotationTables { #expect(try raw.scalarInt("SELECT count(*) FROM \(table)") == 0) }
        #expect(try keyItems(storeID, keyID: oldKey) == 0, "the old key item is gone")
        #expect(try keyItems(storeID) == 1)
        let reopened = try t.reopen()
        #expect(try reopened.refreshToken(account: "acct-2999")?.stringValue() == "rt-2999")
        print("METRIC key_rotation rows=\(report.rowsResealed) seconds=\(String(format: "%.3f", seconds)) batches=\(report.batches) batch_size=500")
    }

    @Test("kill -9 at every rotation step, then open: all rows readable, one active key, no key deleted while used")
    func crashAtEveryRotationStep() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let repeats = Int(ProcessInfo.processInfo.environment["TOKENSTORE_CRASH_REPEATS"] ?? "") ?? 20
        let points = ["rotate.afterNewKey", "rotate.afterBatch", "rotate.afterSwitch", "rotate.afterOldKeyDeleted"]
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let accounts = 60, loggingOut = 5, extraOutbox = 20
        try seed(t.store, accounts: accounts, loggingOut: loggingOut, extraOutbox: extraOutbox)
        let rows = accounts * 3 + extraOutbox
        t.store.close()

        var violations: [String] = []
        var covered = 0
        for point in points {
            var died = 0
            for round in 0..<repeats {
                // The seeded logouts stand for logouts still waiting for the server: kept recent, so
                // that an open does not take them for interrupted ones and finish them
                // (SessionLedger.interruptedLogoutAge) however long the loop runs.
                try t.rawDatabase().run("UPDATE account_marks SET updated_at = ?", [.int(Timestamp.nowMillis())])
                let oldKey = try t.reopen().keyIdentifier
                let result = try runChild(child, ["km-rotate", t.path, "16"], environment: ["TOKENSTORE_CRASH_POINT": point])
                if result.diedAtCrashPoint(point) { died += 1 } else {
                    violations.append("\(point)#\(round): the child did not die: \(result.status) \(result.stderr)")
                }
                // Before any recovery: every key a row or record names is still in the keyring.
                do {
                    let raw = try t.rawDatabase()
                    let (rowKeys, records) = try referencedKeyIDs(raw)
                    if records.values.filter({ $0 == "active" }).count != 1 { violations.append("\(point)#\(round): active keys \(records)") }
                    if rowKeys.count != 1 { violations.append("\(point)#\(round): rows under \(rowKeys.count) keys") }
                    for keyID in rowKeys where try keyItems(storeID, keyID: keyID) != 1 {
                        violations.append("\(point)#\(round): a key still used by rows left the keyring")
                    }
                    for keyID in rowKeys where records[keyID] != "active" {
                        violations.append("\(point)#\(round): rows are sealed under a key that is not active")
                    }
                }
                // Open: recovery finishes the rotation.
                let store = try t.reopen()
                let verification = try store.verify()
                if !verification.isHealthy || verification.rowsChecked != rows {
                    violations.append("\(point)#\(round): verify \(verification.rowsChecked) rows, bad \(verification.badRows.count)")
                }
                let problems = try checkSeeded(store, accounts: accounts, loggingOut: loggingOut, extraOutbox: extraOutbox)
                if !problems.isEmpty { violations.append("\(point)#\(round): \(problems.prefix(3))") }
                let keys = try store.dataKeys()
                if keys.map(\.status) != [.active] || keys.first?.identifier != store.keyIdentifier {
                    violations.append("\(point)#\(round): keys after open \(keys.map(\.status))")
                }
                if store.keyIdentifier == oldKey { violations.append("\(point)#\(round): the rotation was not finished") }
                if try keyItems(storeID) != 1 || keyItems(storeID, keyID: store.keyIdentifier) != 1 {
                    violations.append("\(point)#\(round): keyring holds \(try keyItems(storeID)) items for the store")
                }
                store.close()
            }
            if died == repeats { covered += 1 }
        }
        #expect(violations.isEmpty, "\(violations.prefix(10))")
        #expect(covered == points.count)
        print("METRIC crash_points area=rotation points_covered=\(covered)/\(points.count) repeats_per_point=\(repeats) violations=\(violations.count)")
    }

    @Test("crypto-erase: the key rotates after the last logout (outbox path and local path), not when turned off")
    func cryptoEraseAfterLastLogout() throws {
        let t = try TestStore()
        let store = t.store
        let storeID = store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-a"), appleUserID: "user-a", accessToken: nil)
        try store.ledger.saveSignIn(account: "bob", refreshToken: secret("rt-b"), appleUserID: "user-b", accessToken: nil)
        let first = store.keyIdentifier

        // Alice logs out: bob is still signed in, so no rotation.
        guard case .queued(let entries) = try store.ledger.beginLogout(account: "alice") else { Issue.record("not queued"); return }
        try store.ledger.recordRevocationAttempt(entries[0], result: .revoked)
        #expect(store.keyIdentifier == first)

        // Bob logs out last: the erase is owed by the logout transaction, and runs as
        // explicit maintenance (which the session layer calls after a logout), not inside it.
        guard case .queued(let bobEntries) = try store.ledger.beginLogout(account: "bob") else { Issue.record("not queued"); return }
        try store.ledger.recordRevocationAttempt(bobEntries[0], result: .revoked)
        #expect(store.keyIdentifier == first, "the logout transaction itself does not rotate")
        #expect(try store.performOwedMaintenance() != nil)
        #expect(try store.performOwedMaintenance() == nil, "nothing owed any more")
        let second = store.keyIdentifier
        #expect(second != first)
        #expect(try keyItems(storeID, keyID: first) == 0, "the old key item is gone")
        #expect(try keyItems(storeID) == 1)
        #expect(try store.credentialState(forUserID: "user-a") == .revoked)
        #expect(try store.credentialState(forUserID: "user-b") == .revoked)
        #expect(try store.credentialStateHistory(forUserID: "user-b").map(\.to) == [.authorized, .revoked])
        #expect(try store.verify().isHealthy)

        // The local-only path (no refresh token stored) also erases.
        try store.set(secret("user-c"), for: key("carol", .appleUserID))
        try store.ledger.finishLocalLogout(account: "carol")
        try store.performOwedMaintenance()
        #expect(store.keyIdentifier != second)
        #expect(try keyItems(storeID) == 1)

        // Turned off: no rotation.
        let quiet = try TokenStore(path: t.path, appID: testAppID, options: .init(rotatesKeyAfterLastLogout: false))
        try quiet.ledger.saveSignIn(account: "dave", refreshToken: secret("rt-d"), appleUserID: "user-d", accessToken: nil)
        let kept = quiet.keyIdentifier
        guard case .queued(let daveEntries) = try quiet.ledger.beginLogout(account: "dave") else { Issue.record("not queued"); return }
        try quiet.ledger.recordRevocationAttempt(daveEntries[0], result: .revoked)
        #expect(try quiet.performOwedMaintenance() == nil)
        #expect(quiet.keyIdentifier == kept)
    }

    @Test("destroyStore deletes the database, -wal, -shm, the locks, the discovery cache and the key items")
    func destroy() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "user", accessToken: nil)
        #expect(FileManager.default.fileExists(atPath: t.path + "-wal"))
        #expect(try keyItems(storeID) == 1)
        // The session layer's renewal lock is one of the store's files too.
        #expect(FileManager.default.createFile(atPath: FileLayout.renewalLockPath(of: t.path), contents: nil))
        // So is the session layer's discovery cache (and a temporary copy a crash left).
        #expect(FileManager.default.createFile(atPath: FileLayout.legacyDiscoveryPath(of: t.path), contents: Data("{}".utf8)))
        #expect(FileManager.default.createFile(atPath: FileLayout.legacyDiscoveryPath(of: t.path) + ".tmp", contents: nil))
        try t.store.destroyStore(confirm: .yesDestroyEverything)
        for file in FileLayout.allFiles(of: t.path) {
            #expect(!FileManager.default.fileExists(atPath: file), "\(file) left")
        }
        let directory = (t.path as NSString).deletingLastPathComponent
        let left = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(left.isEmpty, "left in the store's folder: \(left)")
        #expect(try keyItems(storeID) == 0)
        #expect(throws: TokenStoreError.storeClosed) { try t.store.counts() }
        // Destroying what is already gone succeeds.
        try TokenStore.destroyStore(path: t.path, appID: testAppID, confirm: .yesDestroyEverything)
    }

    @Test("reset after a lost key: history intact, states revoked (keyLost), outbox recorded lost, fresh key")
    func resetAfterLostKey() throws {
        let t = try TestStore()
        let store = t.store
        let storeID = store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-a"), appleUserID: "user-a", accessToken: nil)
        try store.ledger.saveSignIn(account: "bob", refreshToken: secret("rt-b"), appleUserID: "user-b", accessToken: nil)
        guard case .queued(let entries) = try store.ledger.beginLogout(account: "bob") else { Issue.record("not queued"); return }
        try store.ledger.recordRevocationAttempt(entries[0], result: .retryLater(error: "offline", nextAttemptAt: Date()))
        let oldKey = store.keyIdentifier
        store.close()

        let raw = try t.rawDatabase()
        func history() throws -> [[String]] {
            var rows: [[String]] = []
            try raw.forEachRow("SELECT id, hex(user_ref), at, from_state, to_state, reason, coalesce(detail, '') FROM credential_history ORDER BY id") { row in
                rows.append((0..<7).map { row.text(Int32($0)) })
            }
            return rows
        }
        let before = try history()
        #expect(before.count == 3)

        try PrivateKeyring.clearItems(storeID: storeID)
        #expect(throws: TokenStoreError.dataKeyMissing) { try t.reopen() }

        let report = try TokenStore.resetStore(path: t.path, appID: testAppID, confirm: .yesDiscardSealedData)
        #expect(report.itemsDestroyed == 2)
        #expect(report.credentialStatesRevoked == 2)
        #expect(report.pendingRevocationsLost == 1)
        #expect(report.discardedKeyIdentifiers == [oldKey])
        #expect(report.newKeyIdentifier != oldKey)

        let after = try history()
        #expect(Array(after.prefix(3)) == before, "the earlier history rows are untouched")
        #expect(after.count == 6)
        #expect(after.dropFirst(3).filter { $0[5] == "keyLost" && $0[4] == "revoked" }.count == 3)
        #expect(after.dropFirst(3).filter { $0[6] == CredentialStateDetail.pendingRevocationLost }.count == 1)
        for table in ["items", "pending_revocations", "credential_states", "account_marks"] {
            #expect(try raw.scalarInt("SELECT count(*) FROM \(table)") == 0, "\(table)")
        }

        let reopened = try t.reopen()
        #expect(reopened.keyIdentifier == report.newKeyIdentifier)
        #expect(try keyItems(storeID) == 1)
        #expect(try reopened.counts() == StoreCounts(items: 0, accounts: 0, pendingRevocations: 0, credentialStates: 0))
        let kept = try reopened.credentialHistoryFromBeforeReset()
        #expect(kept.count == 6)
        #expect(kept.filter { $0.transition.reason == .keyLost }.count == 3)
        #expect(Set(kept.map(\.subject)).count == 3, "alice, bob, and the lost outbox entry")
        // Documented: the old rows cannot be found by user id any more.
        #expect(try reopened.credentialState(forUserID: "user-a") == .notFound)
        try reopened.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-a2"), appleUserID: "user-a", accessToken: nil)
        #expect(try reopened.credentialState(forUserID: "user-a") == .authorized)
        #expect(try reopened.verify().isHealthy)
    }

    @Test("an interrupted rotation whose new key never reached the keyring is rolled back at open")
    func rollBackWhenNewKeyMissing() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try seed(t.store, accounts: 5, loggingOut: 1)
        let active = t.store.keyIdentifier
        t.store.close()
        // The state a crash between recording the `next` key and storing it leaves.
        let raw = try t.rawDatabase()
        let ghost = try DataKey.generate()
        try raw.run(
            "INSERT INTO data_keys(key_id, status, key_check, created_at) VALUES (?, 'next', ?, 0)",
            [.blob(ghost.keyID), .blob(KeyCheck.seal(storeID: Hex.decode(storeID)!, key: ghost))])
        let store = try t.reopen()
        #expect(store.keyIdentifier == active)
        #expect(try store.dataKeys().map(\.status) == [.active])
        #expect(try checkSeeded(store, accounts: 5, loggingOut: 1).isEmpty)
        #expect(try keyItems(storeID) == 1)
        // A rotation now works.
        try store.rotateDataKey()
        #expect(store.keyIdentifier != active)
    }

    @Test("a rotation re-seals the discovery documents and the DPoP state: read back under the new key, filed under its hashes, verify clean")
    func rotationReSealsDiscoveryAndDPoPState() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let fetched = Date(timeIntervalSince1970: 1_800_000_000)
        let issuers = (0..<7).map { "https://issuer\($0).example/" }
        for issuer in issuers {
            try t.store.saveServerDocument(
                ServerDocument(
                    issuer: issuer, document: Array("{\"issuer\":\"\(issuer)\"}".utf8), supplement: [1, 2, 3], fetchedAt: fetched,
                    previousEndpoints: ServerEndpoints(issuer: issuer, token: issuer + "token", revocation: nil)))
        }
        try t.store.recordDPoPNonce("nonce-a", origin: "https://a.example")
        try t.store.recordDPoPNonce("nonce-b", origin: "https://b.example")
        let oldKey = t.store.keyIdentifier
        let raw = try t.rawDatabase()
        let lookupsBefore = try Set(blobs(raw, "SELECT lookup FROM discovery") + blobs(raw, "SELECT lookup FROM dpop_state"))

        try t.store.rotateDataKey(batchSize: 3)  // several batches per table

        let reopened = try t.reopen()
        #expect(reopened.keyIdentifier != oldKey)
        let kept = try reopened.serverDocuments().sorted { $0.issuer < $1.issuer }
        #expect(kept.map(\.issuer) == issuers)
        #expect(kept.allSatisfy { $0.supplement == [1, 2, 3] && $0.fetchedAt == fetched && $0.previousEndpoints?.token == $0.issuer + "token" })
        #expect(try reopened.serverDocument(issuer: issuers[3])?.document == Array("{\"issuer\":\"\(issuers[3])\"}".utf8))
        #expect(try reopened.dpopNonce(origin: "https://a.example") == "nonce-a")
        #expect(try reopened.dpopNonce(origin: "https://b.example") == "nonce-b")
        // Filed under the new key's hashes (none of the old ones is left), every row under the new key.
        let lookupsAfter = try Set(blobs(raw, "SELECT lookup FROM discovery") + blobs(raw, "SELECT lookup FROM dpop_state"))
        #expect(lookupsAfter.count == 9 && lookupsAfter.isDisjoint(with: lookupsBefore))
        #expect(try blobs(raw, "SELECT key_id FROM discovery UNION SELECT key_id FROM dpop_state").count == 1)
        let report = try reopened.verify()
        #expect(report.badRows.isEmpty && report.rowsChecked >= 9)
    }

    @Test("a second rotation while one runs is databaseBusy; a bad batch size is invalidInput")
    func oneRotationAtATime() throws {
        let t = try TestStore()
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        #expect(throws: TokenStoreError.invalidInput) { try t.store.rotateDataKey(batchSize: 0) }
        do {
            let held = try #require(try RotationLock.acquire(storePath: t.path))
            #expect(throws: TokenStoreError.databaseBusy) { try t.store.rotateDataKey() }
            #expect(try RotationLock.acquire(storePath: t.path) == nil, "a second lock in the same process is refused too")
            withExtendedLifetime(held) {}
        }
        #expect(try t.store.rotateDataKey().rowsResealed == 0)
    }

    @Test("no Secret Service and no provider chosen: secretServiceUnavailable naming both ways out")
    func noSecretServiceNoProvider() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        for bus in [PrivateKeyring.ChildBus.none, .withoutSecretService] {
            let dir = try TemporaryDirectory()
            let path = dir.appending("store/tokens.sqlite").path
            let result = try PrivateKeyring.runChild(on: bus, executable: child.path, arguments: ["km-open-default", path])
            #expect(result.status == 0, "\(result)")
            #expect(result.standardOutput.contains("ERROR secretServiceUnavailable"), "\(result)")
            let hint = result.standardOutput.split(separator: "\n").first { $0.hasPrefix("HINT ") } ?? ""
            #expect(hint.contains("gnome-keyring-daemon") && hint.contains("PassphraseKeyProvider"), "\(hint)")
            // Nothing was chosen instead: no key recorded, no key file. Since issue 24 the failed
            // first open removes what it made, so there is no store file (nor its folder) at all.
            #expect(!FileManager.default.fileExists(atPath: path), "the failed open left the store file")
            #expect(!FileManager.default.fileExists(atPath: dir.appending("store").path), "the failed open left its folder")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
        }
    }
}

// MARK: - Passphrase provider (no keyring involved)

@Suite("PassphraseKeyProvider", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PassphraseKeyProviderTests {
    /// Key files go to `keys/` beside the store's directory (the default is under $XDG_STATE_HOME).
    private func provider(_ path: String, _ phrase: String) -> PassphraseKeyProvider {
        PassphraseKeyProvider(storePath: path, passphrase: secret(phrase), limits: .interactive, keyDirectory: keysDirectory(path))
    }

    private func keysDirectory(_ path: String) -> String {
        (((path as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent as NSString).appendingPathComponent("keys")
    }

    private func fileBytes(_ directory: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            out[name] = FileManager.default.contents(atPath: directory + "/" + name)
        }
        return out
    }

    private func keyFile(_ directory: String) throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".key") }
        #expect(names.count == 1, "\(names)")
        return directory + "/" + (names.first ?? "missing")
    }

    @Test("right passphrase opens; wrong one is wrongPassphrase and changes nothing")
    func rightAndWrong() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let storeDir = dir.appending("keys").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "correct horse battery"))
        try store.set(secret("s3cret"), for: key("alice"))
        store.close()
        let file = try keyFile(storeDir)
        #expect(FileLayout.mode(of: file) == 0o600)
        #expect(!(FileManager.default.contents(atPath: file) ?? Data()).contains("s3cret"))

        let reopened = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "correct horse battery"))
        #expect(try reopened.secret(for: key("alice"))?.stringValue() == "s3cret")
        reopened.close()

        let before = try fileBytes(storeDir)
        for wrong in ["correct horse batterY", "x"] {
            #expect(throws: TokenStoreError.wrongPassphrase) { try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, wrong)) }
        }
        #expect(try fileBytes(storeDir) == before, "a wrong passphrase changed a file")
    }

    @Test("a tampered wrapped key is integrityCheckFailed, with or without a fixed-up checksum")
    func tampered() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw"))
        try store.set(secret("v"), for: key("alice"))
        store.close()
        let file = try keyFile(dir.appending("keys").path)
        let original = try #require(FileManager.default.contents(atPath: file))
        #expect(original.count == WrappedKeyFile.totalCount)

        func attempt(_ bytes: [UInt8]) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            _ = chmod(file, 0o600)
            #expect(throws: TokenStoreError.integrityCheckFailed) { try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw")) }
        }
        var bytes = [UInt8](original)
        // Every region, checksum left stale.
        for offset in [0, 4, 6, 22, 40, 70, 100, WrappedKeyFile.totalCount - 1] {
            var copy = bytes
            copy[offset] ^= 0x01
            try attempt(copy)
        }
        // The wrapped key altered and the checksum recomputed: the passphrase verifies, the key does not open.
        bytes[WrappedKeyFile.headerCount + 32 + 3] ^= 0x80
        let body = Array(bytes[0..<(WrappedKeyFile.totalCount - 32)])
        try attempt(body + Blake2b.digest(body))
        try attempt(Array(original.prefix(100)))
        try attempt([UInt8](original) + [0])

        try original.write(to: URL(fileURLWithPath: file))
        let healed = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw"))
        #expect(try healed.secret(for: key("alice"))?.stringValue() == "v")
    }

    @Test("rotation and destroy with the passphrase provider replace and remove the key files")
    func rotateAndDestroy() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let storeDir = dir.appending("keys").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw"))
        try store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "user", accessToken: nil)
        let before = try keyFile(storeDir)
        try store.rotateDataKey()
        let after = try keyFile(storeDir)
        #expect(before != after)
        #expect(after.contains(store.keyIdentifier))
        #expect(try store.refreshToken(account: "alice")?.stringValue() == "rt")
        try store.destroyStore(confirm: .yesDestroyEverything)
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeDir).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.appending("store").path).isEmpty)
    }

    @Test("a symlinked or group-readable key file is refused")
    func unsafeFiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw"))
        store.close()
        let file = try keyFile(dir.appending("keys").path)
        _ = chmod(file, 0o640)
        #expect(throws: TokenStoreError.unsafeFileLayout) { try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw")) }
        _ = chmod(file, 0o600)
        let moved = dir.appending("elsewhere.key").path
        try FileManager.default.moveItem(atPath: file, toPath: moved)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: moved)
        #expect(throws: TokenStoreError.unsafeFileLayout) { try TokenStore(path: path, appID: testAppID, keyProvider: provider(path, "pw")) }
    }
}

// MARK: - Locked keyring (in a child process with a keyring of its own)

/// The scenario runs in a child that re-runs this test binary inside its own
/// `scripts/with-keyring`, so locking never disturbs tests that use the shared keyring.
@Suite("Key management: locked keyring", .serialized, keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyManagementLockedKeyringTests {
    static let scenarioVariable = "TOKENSTORE_KM_CHILD_SCENARIO"
    static let reportVariable = "TOKENSTORE_KM_CHILD_REPORT"

    @Test("locked keyring: keyringLocked without a prompt, and with a dismissed prompt; no new key; works after unlock; an erase owed runs at the next open")
    func lockedKeyring() throws {
        let directory = try TemporaryDirectory(prefix: "tokenstore-km-child")
        let reportURL = directory.appending("report.txt")
        let result = try PrivateKeyring.runChild(
            on: .ownPrivateKeyring, executable: try PrivateKeyring.currentExecutable(),
            arguments: ["--testing-library", "swift-testing", "--filter", "keyManagementChildScenario"],
            environment: [Self.scenarioVariable: "locked", Self.reportVariable: reportURL.path])
        let report = ChildReport(text: (try? String(contentsOf: reportURL, encoding: .utf8)) ?? "", process: result)
        #expect(result.status == 0, "child failed: \(result)")
        #expect(report.lines.last?.0 == "done", "the child scenario did not finish: \(report)")
        report.expect([
            ("create", "ok"),
            ("locked", "true"),
            ("open-default", "keyringLocked"),
            ("open-interactive", "keyringLocked"),
            ("interactive-bounded", "ok"),
            ("rotate-while-locked", "keyringLocked"),
            ("no-new-key", "ok"),
            ("erase-while-locked", "owed"),
            ("unlock", "ok"),
            ("open-after-unlock", "match"),
            ("erase-at-open", "erased"),
        ])
    }
}

@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct KeyManagementChildScenarioEntry {
    /// The entry point of the child process; skipped in a normal run.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[KeyManagementLockedKeyringTests.scenarioVariable] != nil, "runs only as a child scenario"))
    func keyManagementChildScenario() throws {
        let path = try #require(ProcessInfo.processInfo.environment[KeyManagementLockedKeyringTests.reportVariable])
        let report = ChildReportWriter(path: path)
        defer {
            try? PrivateKeyring.unlockDefaultCollection()  // the keyring is this child's own; unlock anyway
            report.record("done", "ok")
        }
        let dir = try TemporaryDirectory()
        let storePath = dir.appending("tokens.sqlite").path
        var rotating: TokenStore?
        // A second store whose last account logs out while the keyring is locked.
        let erasingPath = dir.appending("erasing.sqlite").path
        var erasing: TokenStore?
        report.step("create") {
            let store = try TokenStore(path: storePath, appID: testAppID)
            try store.set(secret("locked-away"), for: key("alice"))
            store.close()
            rotating = try TokenStore(path: storePath, appID: testAppID)
            erasing = try TokenStore(path: erasingPath, appID: testAppID)
            try erasing?.ledger.saveSignIn(account: "zoe", refreshToken: secret("rt-z"), appleUserID: "user-z", accessToken: nil)
            return "ok"
        }
        let eraseOwed = {
            try Database(path: erasingPath).scalarInt("SELECT count(*) FROM store_info WHERE erase_owed_since IS NOT NULL")
        }
        report.step("locked") {
            try PrivateKeyring.lockDefaultCollection()
            return String(try PrivateKeyring.isDefaultCollectionLocked())
        }
        report.step("open-default") { _ = try TokenStore(path: storePath, appID: testAppID); return "opened" }
        let started = ContinuousClock.now
        report.step("open-interactive") {
            // No display in the private session: gnome-keyring's prompter cannot show, so the
            // prompt counts as dismissed.
            let provider = SecretServiceKeyProvider(allowsUserInteraction: true, interactionTimeout: .seconds(20))
            _ = try TokenStore(path: storePath, appID: testAppID, keyProvider: provider)
            return "opened"
        }
        let elapsed = ContinuousClock.now - started
        report.record("interactive-bounded", elapsed < .seconds(25) ? "ok" : "slow", "\(elapsed)")
        report.step("rotate-while-locked") {
            _ = try rotating?.rotateDataKey()
            return "rotated"
        }
        report.step("no-new-key") {
            let raw = try Database(path: storePath)
            let keys = try raw.scalarInt("SELECT count(*) FROM data_keys")
            return keys == 1 ? "ok" : "keys: \(keys ?? -1)"
        }
        var keyBeforeErase: String?
        report.step("erase-while-locked") {
            guard let store = erasing, case .queued(let entries) = try store.ledger.beginLogout(account: "zoe") else { return "not queued" }
            keyBeforeErase = store.keyIdentifier
            try store.ledger.recordRevocationAttempt(entries[0], result: .revoked)  // the last secret goes; the rotation cannot run
            store.close()
            let owed = try eraseOwed()
            return store.keyIdentifier == keyBeforeErase && owed == 1 ? "owed" : "not owed"
        }
        report.step("unlock") { try PrivateKeyring.unlockDefaultCollection(); return "ok" }
        report.step("open-after-unlock") {
            let store = try TokenStore(path: storePath, appID: testAppID)
            return try store.secret(for: key("alice"))?.stringValue() == "locked-away" ? "match" : "mismatch"
        }
        report.step("erase-at-open") {
            let store = try TokenStore(path: erasingPath, appID: testAppID)
            guard let old = keyBeforeErase, store.keyIdentifier != old else { return "same key" }
            guard try keyItems(store.storeIdentifier, keyID: old) == 0 else { return "old key item left" }
            guard try keyItems(store.storeIdentifier) == 1, (try eraseOwed()) == 0 else { return "debt left" }
            return try store.credentialState(forUserID: "user-z") == .revoked ? "erased" : "state lost"
        }
    }
}
