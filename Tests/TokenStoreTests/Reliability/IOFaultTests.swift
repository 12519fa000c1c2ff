import CFaultVFS
import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// io_faults: I/O errors injected the way SQLite tests itself. A test-only VFS (Tests/FaultVFS)
/// wraps "unix" and fails the Nth xWrite (SQLITE_IOERR_WRITE or SQLITE_FULL), xSync or xRead
/// of the store's files. Each session transaction — sign-in, refresh, logout (outbox, then the
/// confirmed revocation), key rotation — runs for N = 1, 2, 3, … until it completes without
/// reaching the fault. Every fault must surface as a typed `ioError` or `diskFull`; after
/// reopening without faults, every acknowledged write is there, no secret is wrong, and the
/// store verifies.
///
/// The keys live in a ``MemoryKeyProvider``: every point starts from a copy of one baseline
/// store *and* of its keys, which a rotation replaces (the shared keyring cannot hand back a
/// deleted key per point). The key provider is not what is under test here; SQLite is real.
@Suite("Reliability: io_faults", .serialized, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct IOFaultTests {
    enum Operation: String, CaseIterable { case signIn, refresh, logout, rotate }

    static let kinds: [(name: String, kind: Int32)] = [
        ("write", Int32(TOKENSTORE_FAULT_WRITE)), ("sync", Int32(TOKENSTORE_FAULT_SYNC)),
        ("read", Int32(TOKENSTORE_FAULT_READ)), ("full", Int32(TOKENSTORE_FAULT_FULL)),
    ]

    struct Tally {
        var faults = 0, lost = 0, wrong = 0, untyped = 0, runs = 0, ioErrors = 0, diskFull = 0
    }

    @Test("every injected write, sync, read and disk-full fault is typed; nothing acknowledged is lost; no wrong secret")
    func ioFaults() throws {
        #expect(tokenstore_faultvfs_register() == 0)
        let vfs = String(cString: tokenstore_faultvfs_name())
        let base = try TemporaryDirectory()
        let basePath = base.appending("store/tokens.sqlite").path
        let baseKeys = MemoryKeyProvider()
        let baseKeyID: String
        do {
            let store = try TokenStore(path: basePath, appID: testAppID, keyProvider: baseKeys)
            for name in ["alice", "bob"] {
                try store.ledger.saveSignIn(account: AccountID(name), refreshToken: secret("\(name)-rt-0"), appleUserID: "\(name)-user", accessToken: nil)
            }
            baseKeyID = store.keyIdentifier
            store.close()
        }
        let started = Date()
        var tally = Tally()
        for operation in Operation.allCases {
            for (kindName, kind) in Self.kinds {
                var nth: Int32 = 1
                while nth < 5_000 {
                    let point = "\(operation.rawValue)/\(kindName)/N=\(nth)"
                    let copy = try TemporaryDirectory()
                    let path = copy.appending("store/tokens.sqlite").path
                    try Self.copyStore(from: basePath, to: path)
                    let keys = MemoryKeyProvider(baseKeys.snapshot)
                    let store = try TokenStore(
                        path: path, appID: testAppID, keyProvider: keys, logger: .disabled, options: .init(), migrator: Migrator(),
                        vfs: vfs)
                    tokenstore_faultvfs_arm(kind, nth)
                    let outcome = Result { try Self.run(operation, on: store) }
                    let fired = tokenstore_faultvfs_fired() > 0
                    tokenstore_faultvfs_disarm()
                    store.close()
                    tally.runs += 1
                    if fired { tally.faults += 1 }
                    switch outcome {
                    case .success(let resultWasRight):
                        if !resultWasRight { tally.wrong += 1; Issue.record("\(point): the operation returned a wrong result") }
                    case .failure(let error as TokenStoreError) where error.code == .ioError || error.code == .diskFull:
                        if !fired { Issue.record("\(point): failed without a fault: \(error)") }
                        if error.code == .diskFull { tally.diskFull += 1 } else { tally.ioErrors += 1 }
                        if kind == TOKENSTORE_FAULT_FULL, error.code != .diskFull, Self.isWriteFault(error) {
                            Issue.record("\(point): SQLITE_FULL surfaced as \(error.code)")
                        }
                    case .failure(let error):
                        tally.untyped += 1
                        Issue.record("\(point): not an ioError/diskFull: \(error)")
                    }
                    let acknowledged: Bool
                    if case .success = outcome { acknowledged = true } else { acknowledged = false }
                    let (lost, wrong) = try Self.check(operation, path: path, keys: keys, acknowledged: acknowledged, baseKeyID: baseKeyID, point: point)
                    tally.lost += lost
                    tally.wrong += wrong
                    if !fired { break }  // the operation completed without reaching the fault
                    nth += 1
                }
            }
        }
        let points = Operation.allCases.count * Self.kinds.count
        let seconds = Int(Date().timeIntervalSince(started))
        print("io_faults: \(tally.runs) runs in \(seconds) s; failed with ioError \(tally.ioErrors), diskFull \(tally.diskFull)")
        Reliability.metric("io_faults", ["points": points, "faults": tally.faults, "lost": tally.lost, "wrong": tally.wrong])
        #expect(tally.faults > 100, "faults were injected")
        #expect(tally.ioErrors > 0 && tally.diskFull > 0, "faults reached the caller as ioError and as diskFull")
        #expect(tally.lost == 0 && tally.wrong == 0 && tally.untyped == 0)
    }

    /// Runs `operation`; returns whether its result was the right one.
    static func run(_ operation: Operation, on store: TokenStore) throws -> Bool {
        switch operation {
        case .signIn:
            try store.ledger.saveSignIn(
                account: "carol", refreshToken: secret("carol-rt"), appleUserID: "carol-user",
                accessToken: AccessTokenEntry(token: secret("carol-at"), expiresAt: Date() + 3600, scopes: ["read"]))
            return true
        case .refresh:
            let result = try store.ledger.replaceRefreshToken(
                account: "alice", presented: secret("alice-rt-0"), with: secret("alice-rt-1"),
                accessToken: AccessTokenEntry(token: secret("alice-at"), expiresAt: Date() + 3600, scopes: ["read"]))
            return result == .stored
        case .logout:
            guard case .queued(let entries) = try store.ledger.beginLogout(account: "alice"), entries.count == 1,
                entries[0].refreshToken == secret("alice-rt-0")
            else { return false }
            try store.ledger.recordRevocationAttempt(entries[0], result: .revoked)
            return true
        case .rotate:
            try store.rotateDataKey()
            return true
        }
    }

    /// Reopens the store without faults and checks what the operation left; returns (lost, wrong).
    static func check(
        _ operation: Operation, path: String, keys: MemoryKeyProvider, acknowledged: Bool, baseKeyID: String, point: String
    ) throws -> (Int, Int) {
        let store: TokenStore
        do {
            store = try TokenStore(path: path, appID: testAppID, keyProvider: keys)
        } catch {
            Issue.record("\(point): the store does not open after the fault: \(error)")
            return (1, 0)
        }
        defer { store.close() }
        let report = try store.verify()
        if !report.isHealthy { Issue.record("\(point): verify after the fault: \(report)") }
        var lost = 0, wrong = 0
        /// A value outside `allowed`: nothing where something was due is lost, anything else is wrong.
        func expect(_ value: SecretBytes?, in allowed: [String?], _ what: String) {
            let text = value.map { String(decoding: $0.copyBytes(), as: UTF8.self) }
            guard !allowed.contains(text) else { return }
            if text == nil { lost += 1 } else { wrong += 1 }
            Issue.record("\(point): \(what) reads \(text == nil ? "nothing" : "an unexpected value")")
        }
        expect(try store.secret(for: key("bob")), in: ["bob-rt-0"], "bob's refresh token")
        let aliceRT = try store.secret(for: key("alice"))
        let outbox = try store.pendingRevocations()
        switch operation {
        case .signIn:
            expect(try store.secret(for: key("carol")), in: acknowledged ? ["carol-rt"] : [nil, "carol-rt"], "carol's refresh token")
            expect(aliceRT, in: ["alice-rt-0"], "alice's refresh token")
        case .refresh:
            expect(aliceRT, in: acknowledged ? ["alice-rt-1"] : ["alice-rt-0", "alice-rt-1"], "alice's refresh token")
        case .logout:
            for entry in outbox where entry.refreshToken != secret("alice-rt-0") {
                wrong += 1
                Issue.record("\(point): an outbox entry holds an unexpected token")
            }
            let revoked = try store.credentialState(forUserID: "alice-user") == .revoked
            if aliceRT != nil { expect(aliceRT, in: ["alice-rt-0"], "alice's refresh token") }
            if acknowledged {
                if aliceRT != nil || !outbox.isEmpty || !revoked { lost += 1; Issue.record("\(point): the acknowledged logout is not there") }
            } else if aliceRT == nil && outbox.isEmpty && !revoked {
                lost += 1
                Issue.record("\(point): alice's refresh token is gone without a recorded revocation")
            }
        case .rotate:
            expect(aliceRT, in: ["alice-rt-0"], "alice's refresh token")
            if acknowledged && store.keyIdentifier == baseKeyID { lost += 1; Issue.record("\(point): the acknowledged rotation is not there") }
        }
        return (lost, wrong)
    }

    static func isWriteFault(_ error: TokenStoreError) -> Bool {
        if case .sqlite(let code, _) = error.cause { return code & 0xff == 13 || code == 778 }  // SQLITE_FULL, SQLITE_IOERR_WRITE
        return false
    }

    /// Copies the database (and any -wal) into a new private directory.
    static func copyStore(from source: String, to destination: String) throws {
        let directory = (destination as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: source + suffix) {
            try FileManager.default.copyItem(atPath: source + suffix, toPath: destination + suffix)
            chmod(destination + suffix, 0o600)
        }
    }
}

/// Data keys in memory, for the fault test only: each point gets a copy of the baseline keys.
final class MemoryKeyProvider: KeyProvider, @unchecked Sendable {  // `keys` is guarded by `lock`
    let name = "memory (tests)"
    private let lock = NSLock()
    private var keys: [String: [UInt8]]

    init(_ keys: [String: [UInt8]] = [:]) { self.keys = keys }

    var snapshot: [String: [UInt8]] { lock.withLock { keys } }

    private func id(_ reference: DataKeyReference) -> String { "\(reference.storeID)/\(reference.keyID)" }

    func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        lock.withLock { keys[id(reference)].map { SecretBytes($0) } }
    }

    func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        let bytes = key.copyBytes()
        lock.withLock { keys[id(reference)] = bytes }
    }

    func deleteKey(_ reference: DataKeyReference) throws {
        _ = lock.withLock { keys.removeValue(forKey: id(reference)) }
    }

    func availability(of reference: DataKeyReference) throws -> DataKeyAvailability {
        lock.withLock { keys[id(reference)] == nil ? .missing : .present }
    }

    /// The store epoch lives in `keys` too (8 bytes, little-endian), so a snapshot copies it.
    func storeEpoch(storeID: String) throws -> UInt64 {
        lock.withLock { (keys["\(storeID)/epoch"] ?? []).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        let current = try storeEpoch(storeID: storeID)
        guard epoch > current else { return }
        lock.withLock { keys["\(storeID)/epoch"] = withUnsafeBytes(of: epoch.littleEndian) { Array($0) } }
    }

    func deleteStoreEpoch(storeID: String) throws {
        _ = lock.withLock { keys.removeValue(forKey: "\(storeID)/epoch") }
    }
}
