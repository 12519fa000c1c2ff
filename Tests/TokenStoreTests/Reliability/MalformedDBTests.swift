import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// malformed_db: copies of a valid store with random bytes flipped (anywhere, or in the
/// header page), truncated, a page zeroed, all zeros, or a damaged -wal, opened and read
/// completely in child processes (so a crash shows as a signal, not a dead test runner).
///
/// Acceptable outcomes, and why:
/// - `ok`: the damage hit unused space, or a row that still authenticates; every secret that
///   comes back must still equal what was written.
/// - `databaseCorrupt`: SQLite found the damage (malformed page, not a database).
/// - `integrityCheckFailed`: a sealed row (or a field around it) no longer authenticates.
/// - `dataKeyMissing`: the store id / key id / data_keys row changed, so no key in the
///   keyring matches, or the key record is gone while sealed rows remain (no new key is made).
/// - `dataKeyCorrupt`: the key-check constant changed, so the right key looks wrong.
/// - `schemaTampered`: a flipped byte in `sqlite_schema`'s SQL text makes the schema differ
///   from the one the migrations make (caught before any statement uses it).
/// - `schemaTooNew`, `migrationFailed`: the migration ledger changed (a higher version, a
///   different checksum, a ledger that looks missing so re-running migration 1 fails).
/// Never a crash, never an untyped error, never a wrong secret. A file that reads as a new,
/// empty store (its WAL dropped at a damaged frame, or truncated to nothing) gets a new data key
/// (counted as `new_keys_made`); a new key beside any sealed row, or with any secret read back,
/// is the unacceptable outcome `newKeyBesideSealedRows`.
@Suite("Reliability: malformed_db", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct MalformedDBTests {
    static let acceptable: Set<String> = [
        "ok", "databaseCorrupt", "integrityCheckFailed", "dataKeyMissing", "dataKeyCorrupt", "schemaTooNew", "migrationFailed",
        "schemaTampered",
        // Since issue 24: a flip that leaves neither TokenStore's application id nor its table
        // names on page 1 makes the file "another program's database" — a typed refusal, nothing written.
        "notAStore",
    ]
    /// A flipped byte in the WAL makes SQLite drop that frame and every later one: the file
    /// opens as it was before those commits, an older copy of itself, so when the dropped
    /// commits raised the store epoch the right answer is `storeRolledBack` (issue 15 finding
    /// 7). Only for `flip_wal`: no damage to the main file can lower its epoch unnoticed.
    static let acceptableForWALDamage: Set<String> = ["storeRolledBack"]
    static let accounts = 12

    /// The same values as Tests/TestChild/ReliabilityModes.swift `malformedSecret`.
    static func value(_ index: Int) -> [UInt8] {
        Array("malformed-secret-\(index)-".utf8) + (0..<(24 + index * 7)).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ index) }
    }

    static func populate(_ store: TokenStore) throws {
        // Four offline logouts, finished as the logout coordinator finishes one whose revocation
        // must wait (the local part done, the token queued): no logout is left interrupted, so a
        // writing open of a copy has nothing to finish however long after this the test runs (an
        // interrupted logout older than two minutes is finished at open, which raises the epoch in
        // the key provider that every copy shares, and every later copy would read as rolled back).
        for i in 0..<4 {
            try store.set(SecretBytes(value(i) + [0x3f]), for: key("out-\(i)"))
            guard case .queued(let entries) = try store.ledger.beginLogout(account: AccountID("out-\(i)")) else {
                Issue.record("out-\(i): the logout queued nothing")
                continue
            }
            for entry in entries {
                try store.ledger.recordRevocationAttempt(
                    entry, result: Outbox().retryLater(entry, error: "offline", retryAfter: nil, backoff: { _ in .seconds(60) }))
            }
        }
        // After the logouts (whose local part checkpoints): these writes stay in the -wal.
        for i in 0..<accounts {
            try store.set(SecretBytes(value(i)), for: key("mal-\(i)", .generic), attributes: .init(label: "label \(i)"))
            try store.set(SecretBytes(value(i) + [0x21]), for: key("mal-\(i)"))
            try store.recordCredentialState(i % 2 == 0 ? .authorized : .revoked, forUserID: "user-\(i)", reason: .signIn)
        }
    }

    @Test("damaged store files give typed errors, never a crash or a wrong secret")
    func malformedDB() throws {
        let seed = Reliability.seed("malformed_db")
        let total = Int(ProcessInfo.processInfo.environment["MALFORMED_DB_FILES"] ?? "") ?? (Reliability.soak ? 100_000 : 1_000)
        var rng = SeededGenerator(seed: seed)
        let work = try TemporaryDirectory()
        chmod(work.path, 0o700)

        // A closed, checkpointed base file, and a (db, -wal) pair copied while the WAL holds everything.
        let basePath = work.appending("base/tokens.sqlite").path
        let walBase: (db: [UInt8], wal: [UInt8])
        do {
            let walPath = work.appending("walbase/tokens.sqlite").path
            let store = try TokenStore(path: walPath, appID: testAppID)
            try store.connection.withDatabase { db in try db.execute("PRAGMA wal_autocheckpoint = 0") }
            try Self.populate(store)
            // Nothing for an open to finish, even long after (the copies share one key-provider epoch).
            #expect(try store.ledger.finishInterruptedLogouts(olderThan: .zero) == 0, "a logout of the base is left interrupted")
            walBase = (Array(FileManager.default.contents(atPath: walPath) ?? Data()),
                       Array(FileManager.default.contents(atPath: walPath + "-wal") ?? Data()))
            // The base: a copy of this store (same id, same key), checkpointed and closed.
            #expect(try store.connection.withDatabase { db in try db.checkpoint() }, "the base checkpoint finished")
            try FileManager.default.createDirectory(atPath: (basePath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            chmod((basePath as NSString).deletingLastPathComponent, 0o700)
            _ = FileManager.default.createFile(atPath: basePath, contents: FileManager.default.contents(atPath: walPath), attributes: [.posixPermissions: 0o600])
            store.close()
        }
        #expect(walBase.wal.count > 4096, "the -wal holds the writes")
        let base = Array(try #require(FileManager.default.contents(atPath: basePath)))
        do {  // the base reads back in full
            let store = try TokenStore(path: basePath, appID: testAppID)
            for i in 0..<Self.accounts { #expect(try store.secret(for: key("mal-\(i)", .generic))?.copyBytes() == Self.value(i)) }
            #expect(try store.pendingRevocations().count == 4)
            #expect(try store.verify().isHealthy)
        }

        let batchDir = work.appending("batch").path
        mkdir(batchDir, 0o700)
        var outcomes: [String: Int] = [:]
        var kinds: [String: Int] = [:]
        var crashes = 0, wrong = 0, returned = 0, unacceptable = 0, newKeys = 0
        var newKeyKinds: [String: Int] = [:]
        let child = try Reliability.child()
        let batchSize = 100
        var next = 0
        while next < total {
            let count = min(batchSize, total - next)
            var paths: [String] = []
            var kindOf: [String] = []
            for n in 0..<count {
                let path = "\(batchDir)/f\(next + n).sqlite"
                let (kind, db, wal) = Self.mutate(base: base, walBase: walBase, &rng)
                kindOf.append(kind)
                kinds[kind, default: 0] += 1
                _ = FileManager.default.createFile(atPath: path, contents: Data(db), attributes: [.posixPermissions: 0o600])
                if let wal { _ = FileManager.default.createFile(atPath: path + "-wal", contents: Data(wal), attributes: [.posixPermissions: 0o600]) }
                paths.append(path)
            }
            // Run the batch; after a crash, go on from the file after the one that crashed.
            var start = 0
            while start < paths.count {
                let list = work.appending("list.txt")
                try paths[start...].joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
                let result = try runChild(child, ["open-batch", list.path], timeout: 600)
                var lastBegun = -1
                var finished = Set<Int>()
                for line in result.stdout.split(separator: "\n") {
                    let words = line.split(separator: " ")
                    if words.first == "BEGIN", words.count == 2, let index = Int(words[1]) { lastBegun = index }
                    guard words.first == "RESULT", words.count == 5, let index = Int(words[1]) else { continue }
                    finished.insert(index)
                    var code = String(words[2])
                    if code.hasSuffix("+newkey") {
                        newKeys += 1
                        newKeyKinds[kindOf[start + index], default: 0] += 1
                        code = String(code.dropLast("+newkey".count))
                    }
                    outcomes[code, default: 0] += 1
                    let w = Int(words[3].dropFirst("wrong=".count)) ?? 0
                    wrong += w
                    returned += Int(words[4].dropFirst("returned=".count)) ?? 0
                    if w > 0 { Issue.record("file \(next + start + index) (\(kindOf[start + index])): \(w) wrong secrets (seed \(seed))") }
                    let kind = kindOf[start + index]
                    if !Self.acceptable.contains(code), !(kind == "flip_wal" && Self.acceptableForWALDamage.contains(code)) {
                        unacceptable += 1
                        let detail = result.stdout.split(separator: "\n").first { $0.hasPrefix("DETAIL \(index) ") } ?? ""
                        Issue.record("file \(next + start + index) (\(kindOf[start + index])): \(code) (seed \(seed)) \(detail)")
                    }
                }
                if result.status == 0 && finished.count == paths.count - start { break }
                if result.signaled || result.status != 0 {
                    let crashed = max(lastBegun, 0)
                    crashes += 1
                    Issue.record("file \(next + start + crashed) (\(kindOf[start + crashed])) ended the child: status \(result.status) signaled \(result.signaled) (seed \(seed))\n\(result.stderr.suffix(2000))")
                    start += crashed + 1
                } else {
                    Issue.record("the batch ended early: \(result.stderr.suffix(1000))")
                    break
                }
            }
            for path in paths { for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) } }
            next += count
        }

        let tried = outcomes.values.reduce(0, +) + crashes
        Reliability.metric("malformed_db", [
            "files_tried": tried, "seed": seed, "crashes": crashes, "wrong_secrets": wrong, "secrets_returned_intact": returned - wrong,
            "unacceptable_outcomes": unacceptable, "new_keys_made": newKeys,
            "new_key_from": newKeyKinds.isEmpty ? "none" : newKeyKinds.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ","),
            "mutations": kinds.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ","),
            "outcomes": outcomes.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ","),
        ])
        #expect(tried >= total)
        #expect(crashes == 0)
        #expect(wrong == 0)
        #expect(unacceptable == 0)
    }

    /// Two damages random flips found that came back as `ioError` before Database.swift mapped
    /// them: an unknown schema format number in the header ("unsupported file format", a plain
    /// SQLITE_ERROR), and schema text that still parses but names other columns ("no such
    /// column" when the library prepares its statements). Both are `databaseCorrupt`.
    @Test("a damaged schema format number is databaseCorrupt, a damaged schema text schemaTampered")
    func damagedSchema() throws {
        let work = try TemporaryDirectory()
        chmod(work.path, 0o700)
        let path = work.appending("tokens.sqlite").path
        do {
            let store = try TokenStore(path: path, appID: testAppID)
            try Self.populate(store)
            store.close()
        }
        let base = Array(try #require(FileManager.default.contents(atPath: path)))
        func open(_ bytes: [UInt8]) -> String {
            unlink(path + "-wal")
            unlink(path + "-shm")
            _ = FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
            return outcomeCode {
                let store = try TokenStore(path: path, appID: testAppID)
                _ = try store.items()
                _ = try store.pendingRevocations()
                for i in 0..<Self.accounts { _ = try store.secret(for: key("mal-\(i)", .generic)) }
            }
        }
        #expect(open(base) == "ok")
        var format = base
        format[44...47] = [0, 0, 0, 99]
        #expect(open(format) == "databaseCorrupt")
        var renamed = base
        let from = Array("updated_at".utf8), to = Array("updatedXat".utf8)
        var replaced = 0
        for at in 0..<(renamed.count - from.count) where Array(renamed[at..<(at + from.count)]) == from {
            renamed.replaceSubrange(at..<(at + from.count), with: to)
            replaced += 1
        }
        #expect(replaced > 0, "the schema text names updated_at")
        // The schema check sees the changed column name first; SQLite's own prepare would say databaseCorrupt.
        #expect(open(renamed) == "schemaTampered")
    }

    /// One damaged copy: (what was done, the db bytes, the -wal bytes if any).
    static func mutate(base: [UInt8], walBase: (db: [UInt8], wal: [UInt8]), _ rng: inout SeededGenerator) -> (String, [UInt8], [UInt8]?) {
        func flips(_ bytes: inout [UInt8], in range: Range<Int>) {
            for _ in 0..<(1 + Int(rng.next() % 8)) {
                let at = range.lowerBound + Int(rng.next() % UInt64(range.count))
                bytes[at] ^= UInt8(1 + rng.next() % 255)
            }
        }
        var db = base
        let page = 4096
        switch rng.next() % 20 {
        case 0..<8:
            flips(&db, in: 0..<db.count)
            return ("flip", db, nil)
        case 8..<11:
            flips(&db, in: 0..<min(page, db.count))
            return ("flip_header_page", db, nil)
        case 11..<13:
            let length = rng.next() % 2 == 0 ? Int(rng.next() % UInt64(db.count)) : page * Int(rng.next() % UInt64(db.count / page))
            return ("truncate", Array(db[0..<length]), nil)
        case 13..<15:
            let pages = db.count / page
            let at = Int(rng.next() % UInt64(pages)) * page
            for i in at..<min(at + page, db.count) { db[i] = 0 }
            return ("zero_page", db, nil)
        case 15:
            return rng.next() % 2 == 0
                ? ("all_zeros", [UInt8](repeating: 0, count: db.count), nil)
                : ("random_bytes", (0..<db.count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, nil)
        default:
            var wal = walBase.wal
            flips(&wal, in: 0..<wal.count)
            return ("flip_wal", walBase.db, wal)
        }
    }
}
