import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

// Review findings 16 (key separation) and 10 (unkeyed fingerprints): the data key is only a
// master key; sealing, lookups, fingerprints and MACs each have a subkey; a store sealed the
// old way is re-sealed at open, crash-safe; fingerprints are keyed.

/// Opens (or creates) a store whose keys are used the pre-version-8 way (the test hook).
func openLegacyStore(_ path: String) throws -> TokenStore {
    try TokenStore(
        path: path, appID: testAppID, keyProvider: SecretServiceKeyProvider(), logger: .disabled, options: .init(),
        migrator: Migrator(), keyScheme: .legacy)
}

/// Signs in `accounts` accounts and begins the logout of the first one: items, an outbox
/// entry, credential states, a logout mark and history.
func seedSessions(_ store: TokenStore, accounts: Int) throws {
    for n in 0..<accounts {
        try store.ledger.saveSignIn(
            account: AccountID("acct-\(n)"), refreshToken: secret("rt-\(n)"), appleUserID: "user-\(n)", accessToken: nil)
    }
    try store.set(secret("1234"), for: key("pin", .generic))
    _ = try store.ledger.beginLogout(account: AccountID("acct-0"))
}

/// Problems reading back what ``seedSessions(_:accounts:)`` wrote.
func seededProblems(_ store: TokenStore, accounts: Int) throws -> [String] {
    var problems: [String] = []
    for n in 0..<accounts {
        let rt = try store.refreshToken(account: AccountID("acct-\(n)"))?.stringValue()
        if rt != (n == 0 ? nil : "rt-\(n)") { problems.append("refresh token \(n)") }
        if try store.appleUserID(account: AccountID("acct-\(n)")) != "user-\(n)" { problems.append("user id \(n)") }
        if try store.credentialState(forUserID: "user-\(n)") != .authorized { problems.append("state \(n)") }
    }
    if try store.secret(for: key("pin", .generic))?.stringValue() != "1234" { problems.append("pin") }
    if try store.pendingRevocations().compactMap({ $0.refreshToken.stringValue() }) != ["rt-0"] { problems.append("outbox") }
    return problems
}

/// Every sealed blob of the raw database, by table.
func sealedBlobs(_ db: Database) throws -> Set<[UInt8]> {
    var blobs = Set<[UInt8]>()
    for (table, column) in [("items", "sealed"), ("pending_revocations", "sealed"), ("credential_states", "sealed_user")] {
        try db.forEachRow("SELECT \(column) FROM \(table)") { blobs.insert($0.blob(0)) }
    }
    return blobs
}

private func schemes(_ db: Database) throws -> [Int64] {
    var out: [Int64] = []
    try db.forEachRow("SELECT scheme FROM data_keys ORDER BY created_at") { out.append($0.int(0)) }
    return out
}

@Suite("Key separation and keyed fingerprints", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeySeparationTests {
    /// Reproduces finding 16: the data key sealed every value itself (XChaCha20-Poly1305 under
    /// the raw key) while also being the master key of the lookup subkey. Now a sealed value
    /// does not open under the raw data key, only under its sealing subkey.
    @Test("the data key never seals directly: a blob opens under the sealing subkey only")
    func sealingUsesASubkey() throws {
        let t = try TestStore()
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        try t.store.set(secret("value"), for: key("alice"))
        let envelope = t.store.connection.envelope
        #expect(envelope.key.scheme == .derived)
        let raw = try t.rawDatabase()
        let (lookup, blob) = try #require(try raw.firstRow("SELECT lookup, sealed FROM items", []) { ($0.blob(0), $0.blob(1)) })
        let binding = Sealer.Binding(storeID: envelope.storeID, keyID: envelope.keyID, kind: .item, rowKey: lookup)
        let rawKeyUse = try DataKey(keyID: envelope.keyID, material: envelope.key.material, scheme: .legacy)
        #expect(throws: TokenStoreError.integrityCheckFailed) { _ = try Sealer.open(blob, key: rawKeyUse, binding: binding) }
        #expect(throws: Never.self) { _ = try Sealer.open(blob, key: envelope.key, binding: binding) }
        // Four distinct keys: sealing, lookups, fingerprints, MACs, none of them the data key.
        let key = envelope.key
        #expect(key.sealingKey != key.material)
        #expect(key.lookupHash(domain: 9, [[1]]) != key.macHash(domain: 9, [[1]]))
        #expect(try schemes(raw) == [KeyScheme.derived.rawValue])
    }

    /// Finding 16's migration: a store written under the legacy scheme (through the test hook)
    /// is re-sealed under a new key of the derived scheme at its next open; every row stays
    /// readable, `verify` is healthy, and every sealed blob changed.
    @Test("a legacy-scheme store is re-sealed at open: rows readable, verify healthy, blobs changed, one key left")
    func legacyStoreUpgradesAtOpen() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let legacy = try openLegacyStore(path)
        let storeID = legacy.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try seedSessions(legacy, accounts: 4)
        let oldKey = legacy.keyIdentifier
        #expect(legacy.connection.envelope.key.scheme == .legacy)
        #expect(try legacy.verify().isHealthy)
        legacy.close()
        let raw = try Database(path: path)
        #expect(try schemes(raw) == [KeyScheme.legacy.rawValue])
        let before = try sealedBlobs(raw)
        #expect(before.count == 13, "4 user ids, 3 refresh tokens, a PIN, 1 outbox entry, 4 states")

        let store = try TokenStore(path: path, appID: testAppID)
        #expect(store.keyIdentifier != oldKey)
        #expect(store.connection.envelope.key.scheme == .derived)
        #expect(try seededProblems(store, accounts: 4).isEmpty)
        let verification = try store.verify()
        #expect(verification.isHealthy && verification.rowsChecked == before.count)
        #expect(try schemes(raw) == [KeyScheme.derived.rawValue])
        #expect(try sealedBlobs(raw).isDisjoint(with: before), "every sealed blob was re-sealed")
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 1, "the legacy key item is gone")
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": oldKey]) == 0)
        // The logout begun before the upgrade still settles.
        #expect(try store.connection.read { db, envelope in try AccountMarks.isLoggingOut(db, AccountID("acct-0"), envelope: envelope) })
    }

    /// Finding 16, crash safety of the upgrade: a process killed at every rotation step of the
    /// re-seal leaves a store the next open finishes, every row readable.
    @Test("kill -9 at every step of the legacy re-seal, then open: all rows readable, derived scheme, one key")
    func crashDuringUpgrade() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let points = ["rotate.afterNewKey", "rotate.afterBatch", "rotate.afterSwitch", "rotate.afterOldKeyDeleted"]
        var violations: [String] = []
        var died = 0
        for point in points {
            let directory = try TemporaryDirectory()
            let path = directory.appending("store/tokens.sqlite").path
            let legacy = try openLegacyStore(path)
            let storeID = legacy.storeIdentifier
            defer { try? PrivateKeyring.clearItems(storeID: storeID) }
            try seedSessions(legacy, accounts: 30)
            let rows = try legacy.verify().rowsChecked
            legacy.close()
            let result = try runChild(child, ["open", path], environment: ["TOKENSTORE_CRASH_POINT": point])
            if result.diedAtCrashPoint(point) { died += 1 } else { violations.append("\(point): did not die: \(result.stderr)") }
            let store = try TokenStore(path: path, appID: testAppID)
            if store.connection.envelope.key.scheme != .derived { violations.append("\(point): scheme not upgraded") }
            let verification = try store.verify()
            if !verification.isHealthy || verification.rowsChecked != rows { violations.append("\(point): verify") }
            let problems = try seededProblems(store, accounts: 30)
            if !problems.isEmpty { violations.append("\(point): \(problems.prefix(3))") }
            if try store.dataKeys().map(\.status) != [.active] { violations.append("\(point): keys") }
            if try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) != 1 { violations.append("\(point): key items") }
            store.close()
        }
        #expect(violations.isEmpty, "\(violations)")
        #expect(died == points.count)
        print("METRIC crash_points area=key_scheme_upgrade points_covered=\(died)/\(points.count) violations=\(violations.count)")
    }

    /// Reproduces finding 10: `list --json` printed an unkeyed 32-bit BLAKE2b fingerprint with a
    /// public personalization, so a 4-digit PIN fell to a brute force in well under a second.
    /// Now the fingerprint is keyed under a subkey of the data key: no PIN's unkeyed hash
    /// matches, and the same secret in two stores has two fingerprints.
    @Test("a PIN cannot be brute-forced from its listed fingerprint; two stores differ")
    func fingerprintsAreKeyed() throws {
        let a = try TestStore()
        let b = try TestStore()
        defer {
            try? PrivateKeyring.clearItems(storeID: a.store.storeIdentifier)
            try? PrivateKeyring.clearItems(storeID: b.store.storeIdentifier)
        }
        let pin = "4821"
        try a.store.set(secret(pin), for: key("pin", .generic))
        try b.store.set(secret(pin), for: key("pin", .generic))
        let listed = try #require(try a.store.items().first?.fingerprint)
        #expect(listed.count == 8)

        /// The fingerprint as the reviewed code computed it: BLAKE2b-32, personal "tokenstore/fp/v1", no key.
        func unkeyed(_ text: String) -> String {
            Hex.encode(Blake2b.digest(Array(text.utf8), key: nil, length: 4))
        }
        func unkeyedPersonal(_ text: String) -> String {
            let personal = Array("tokenstore/fp/v1".utf8)
            return personal.withUnsafeBytes { Hex.encode(Blake2b.digest(Array(text.utf8), key: $0, length: 4)) }
        }
        let candidates = (0..<10_000).map { String(format: "%04d", $0) }
        let hits = candidates.filter { unkeyed($0) == listed || unkeyedPersonal($0) == listed }
        #expect(!hits.contains(pin), "the brute force recovered the PIN")
        #expect(hits.count <= 2, "at most chance collisions")
        // The per-process fingerprint of SecretBytes (logs) does not give it away either.
        #expect(secret(pin).fingerprint != listed)

        let other = try #require(try b.store.items().first?.fingerprint)
        #expect(other != listed, "the same secret in two stores has two fingerprints")
        #expect(try a.store.item(for: key("pin", .generic))?.fingerprint == listed, "get and list agree")
        #expect(a.store.fingerprint(of: secret(pin)) == listed)
        #expect(try a.reopen().items().first?.fingerprint == listed, "stable for the store")
    }
}
