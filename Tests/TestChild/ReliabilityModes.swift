// Child modes of the reliability catalogue (Tests/TokenStoreTests/Reliability):
//
//   crash-loop STORE SEED              put / sign-in / rotate / logout in a loop, forever; prints
//                                      "READY", then "BEGIN <op> ..." before and "ACK <op> ..." after
//                                      each committed transaction (crash_kill9 kills it)
//   mp-worker STORE ID MILLIS          mixed operations for MILLIS ms; prints "RESULT ..." and "LAT ..."
//                                      (multiprocess)
//   open-batch LISTFILE                opens each listed (damaged) store and reads everything; prints
//                                      "BEGIN i" and "RESULT i <code> wrong=<n> returned=<n>" (malformed_db)
//   umask-open STORE MASK              opens a store under umask MASK (octal); prints the modes (file_modes_links)
//   scan-session STORE URL LOG ACCOUNT USERID CODE
//                                      sign-in, renewal, logout with a trace logger writing to LOG; prints
//                                      "CANARY <token>" for every token it saw (plaintext_scan)
import AuthSession
import Foundation
import TestSupport
import TokenStore
#if canImport(Glibc)
import Glibc
#endif

let reliabilityAppID = "dev.tokenstore.tests"

/// The fixed content of the malformed_db base store: account `mal-<i>` holds this secret.
/// Tests/TokenStoreTests/Reliability/MalformedDBTests.swift writes the same values.
func malformedSecret(_ index: Int) -> [UInt8] {
    Array("malformed-secret-\(index)-".utf8) + (0..<(24 + index * 7)).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ index) }
}
let malformedAccounts = 12

func runReliabilityMode(_ mode: String, _ args: [String]) async throws {
    let storePath = args[1]
    switch mode {
    case "crash-loop":
        guard args.count >= 3, let seed = UInt64(args[2]) else { fail("crash-loop STORE SEED") }
        try crashLoop(storePath: storePath, seed: seed)
    case "mp-worker":
        guard args.count >= 4, let millis = Int(args[3]) else { fail("mp-worker STORE ID MILLIS") }
        try multiprocessWorker(storePath: storePath, id: args[2], millis: millis)
    case "open-batch":
        openBatch(listFile: storePath)
    case "umask-open":
        guard args.count >= 3, let mask = mode_t(args[2], radix: 8) else { fail("umask-open STORE MASK") }
        umask(mask)
        let store = try TokenStore(path: storePath, appID: reliabilityAppID)
        try store.set(SecretBytes(utf8: "x"), for: ItemKey(account: "umask", kind: .generic))
        func mode(_ path: String) -> String {
            var info = stat()
            guard lstat(path, &info) == 0 else { return "absent" }
            return String(info.st_mode & 0o7777, radix: 8)
        }
        let dir = (storePath as NSString).deletingLastPathComponent
        say("MODES dir=\(mode(dir)) db=\(mode(storePath)) wal=\(mode(storePath + "-wal")) shm=\(mode(storePath + "-shm"))")
    case "scan-session":
        guard args.count >= 7 else { fail("scan-session STORE URL LOG ACCOUNT USERID CODE") }
        try await scanSession(storePath: storePath, url: args[2], logPath: args[3], account: args[4], userID: args[5], code: args[6])
    default:
        fail("unknown mode")
    }
}

// MARK: crash_kill9

private func crashLoop(storePath: String, seed: UInt64) throws {
    var rng = SeededGenerator(seed: seed)
    let store = try TokenStore(path: storePath, appID: reliabilityAppID)
    say("READY")
    let accounts = (0..<8).map { "acct-\($0)" }
    let access = AccessTokenEntry(token: SecretBytes(utf8: "at-\(seed)"), expiresAt: Date() + 3600, scopes: ["openid"])
    var n = 0
    while true {
        n += 1
        let account = accounts[Int(rng.next() % UInt64(accounts.count))]
        let value = "rt-\(seed)-\(n)"
        let roll = rng.next() % 100
        if roll < 35 {
            if roll % 2 == 0 {
                say("BEGIN put \(account) \(value)")
                try store.set(SecretBytes(utf8: value), for: ItemKey(account: AccountID(account), kind: .refreshToken))
                say("ACK put \(account) \(value)")
            } else {
                // A sign-in over a live session also moves the replaced token to the outbox.
                say("BEGIN signin \(account) \(value)")
                try store.ledger.saveSignIn(
                    account: AccountID(account), refreshToken: SecretBytes(utf8: value), appleUserID: "user-\(account)", accessToken: access)
                say("ACK signin \(account) \(value)")
            }
        } else if roll < 75 {
            guard let current = try store.refreshToken(account: AccountID(account)) else { continue }
            say("BEGIN rotate \(account) \(value)")
            let result = try store.ledger.replaceRefreshToken(account: AccountID(account), presented: current, with: SecretBytes(utf8: value), accessToken: access)
            say("ACK rotate \(account) \(value) \(result == .stored ? "stored" : "superseded")")
        } else {
            say("BEGIN logout \(account)")
            let preparation = try store.ledger.beginLogout(account: AccountID(account))
            say("ACK logout \(account)")
            switch preparation {
            case .nothingStored:
                break
            case .localOnly:
                say("BEGIN local \(account)")
                try store.ledger.finishLocalLogout(account: AccountID(account))
                say("ACK local \(account)")
            case .queued(let entries):
                for entry in entries {
                    let token = entry.refreshToken.stringValue() ?? "?"
                    say("BEGIN revoke \(account) \(token)")
                    try store.ledger.recordRevocationAttempt(entry, result: .revoked)
                    say("ACK revoke \(account) \(token)")
                }
            }
        }
    }
}

// MARK: multiprocess

private func multiprocessWorker(storePath: String, id: String, millis: Int) throws {
    var rng = SeededGenerator(seed: UInt64(abs(id.hashValue)) | 1)
    let store = try TokenStore(path: storePath, appID: reliabilityAppID)
    let counterKey = ItemKey(account: AccountID("counter-\(id)"), kind: .generic)
    let access = AccessTokenEntry(token: SecretBytes(utf8: "at-\(id)"), expiresAt: Date() + 3600, scopes: ["openid"])
    var own = 0, casStored = 0, casSuperseded = 0, logs = 0, reads = 0, busy = 0, errors = 0
    var latencies: [Int] = []
    latencies.reserveCapacity(100_000)
    var lastError = ""
    let clock = ContinuousClock()
    let end = clock.now + .milliseconds(millis)
    while clock.now < end {
        let roll = rng.next() % 100
        let started = clock.now
        do {
            if roll < 25 {
                let current = try store.secret(for: counterKey).flatMap { $0.stringValue() }.flatMap(Int.init) ?? 0
                guard current == own else { fail("own counter \(current) != \(own)") }
                try store.set(SecretBytes(utf8: String(current + 1)), for: counterKey)
                own += 1
            } else if roll < 50 {
                guard let presented = try store.refreshToken(account: "shared"), let value = presented.stringValue().flatMap(Int.init) else {
                    fail("the shared counter is missing")
                }
                let result = try store.ledger.replaceRefreshToken(
                    account: "shared", presented: presented, with: SecretBytes(utf8: String(value + 1)), accessToken: access)
                if result == .stored { casStored += 1 } else { casSuperseded += 1 }
            } else if roll < 70 {
                try store.set(SecretBytes(utf8: "log-\(id)-\(logs)"), for: ItemKey(account: AccountID("log-\(id)-\(logs)"), kind: .generic))
                logs += 1
            } else if roll < 95 {
                _ = try store.ledger.cachedAccessTokens(account: "shared").first?.entry
                _ = try store.counts()
                reads += 1
            } else {
                _ = try store.credentialState(forUserID: "user-\(id)")
                try store.recordCredentialState(roll % 2 == 0 ? .authorized : .revoked, forUserID: "user-\(id)", reason: .signIn)
                reads += 1
            }
        } catch let error as TokenStoreError {
            if error.code == .databaseBusy { busy += 1 } else { errors += 1 }
            lastError = error.code.rawValue
        }
        let elapsed = clock.now - started
        latencies.append(Int(elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000))
    }
    say("RESULT id=\(id) own=\(own) cas_stored=\(casStored) cas_superseded=\(casSuperseded) logs=\(logs) reads=\(reads) busy=\(busy) errors=\(errors) last_error=\(lastError.isEmpty ? "-" : lastError)")
    say("LAT " + latencies.map(String.init).joined(separator: ","))
}

// MARK: malformed_db

private func openBatch(listFile: String) {
    guard let list = try? String(contentsOfFile: listFile, encoding: .utf8) else { fail("cannot read \(listFile)") }
    for (index, path) in list.split(separator: "\n").map(String.init).enumerated() {
        say("BEGIN \(index)")
        var wrong = 0, returned = 0
        let created = CreatedKeyFlag()
        let logger = TokenStoreLogger(label: "malformed", level: .info) { record in
            if record.message.contains("created a new data key") { created.set() }
        }
        var code = "ok"
        do {
            let store = try TokenStore(path: path, appID: reliabilityAppID, logger: logger)
            var firstError: TokenStoreError?
            func attempt(_ body: () throws -> Void) {
                do { try body() } catch let error as TokenStoreError { if firstError == nil { firstError = error } } catch {
                    code = "untyped"
                }
            }
            for i in 0..<malformedAccounts {
                attempt {
                    if let value = try store.secret(for: ItemKey(account: AccountID("mal-\(i)"), kind: .generic)) {
                        returned += 1
                        if value.copyBytes() != malformedSecret(i) { wrong += 1 }
                    }
                }
                attempt {
                    if let value = try store.refreshToken(account: AccountID("mal-\(i)")) {
                        returned += 1
                        if value.copyBytes() != malformedSecret(i) + [0x21] { wrong += 1 }
                    }
                }
            }
            attempt { _ = try store.items() }
            attempt {
                for entry in try store.pendingRevocations() {
                    returned += 1
                    guard let i = Int(entry.account.name.dropFirst(4)), entry.account.name.hasPrefix("out-"), i < malformedAccounts,
                          entry.refreshToken.copyBytes() == malformedSecret(i) + [0x3f] else { wrong += 1; continue }
                }
            }
            attempt { _ = try store.credentialState(forUserID: "user-0") }
            attempt { _ = try store.verify() }
            if code == "ok", let firstError {
                code = firstError.code.rawValue
                say("DETAIL \(index) \(firstError)")
            }
            if created.value {
                // A new key is allowed only where the damaged file reads as a new, empty store
                // (e.g. a flipped WAL frame drops it and every later commit, as after a torn
                // write): nothing sealed may exist beside it, and nothing may have come back.
                let counts = try? store.counts()
                let sealedRows = counts.map { $0.items + $0.pendingRevocations + $0.credentialStates }
                if sealedRows != 0 || returned != 0 {
                    code = "newKeyBesideSealedRows"
                    say("DETAIL \(index) rows=\(sealedRows.map(String.init) ?? "unreadable") returned=\(returned)")
                }
                // Keep the test keyring clean.
                try? store.keyProvider.deleteKey(
                    DataKeyReference(storeID: store.storeIdentifier, keyID: store.keyIdentifier, appID: reliabilityAppID))
            }
        } catch let error as TokenStoreError {
            code = error.code.rawValue
            say("DETAIL \(index) \(error)")
        } catch {
            code = "untyped"
            say("DETAIL \(index) \(error)")
        }
        if created.value { code += "+newkey" }
        say("RESULT \(index) \(code) wrong=\(wrong) returned=\(returned)")
    }
}

final class CreatedKeyFlag: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var value: Bool { lock.withLock { flag } }
}

// MARK: plaintext_scan

private func scanSession(storePath: String, url: String, logPath: String, account: String, userID: String, code: String) async throws {
    let sink = LogFile(path: logPath)
    let logger = TokenStoreLogger(label: "scan", level: .trace) { sink.write($0.description) }
    let store = try TokenStore(path: storePath, appID: reliabilityAppID, logger: logger)
    let policy = RetryPolicy(maximumAttempts: 2, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50),
                             maximumRetryAfter: .seconds(2), maximumTotalTime: .seconds(5))
    let session = TokenSession(
        store: store, configuration: try AuthorizationServerConfiguration(domain: url, clientID: "tokenstore-test"),
        retryPolicy: policy, logger: logger)
    func record(_ error: any Error) { sink.write("ERROR \(error)"); sink.write("ERROR \(String(reflecting: error))") }
    func canaries() throws {
        if let rt = try store.refreshToken(account: AccountID(account))?.stringValue() { say("CANARY \(rt)") }
        if let at = try store.ledger.cachedAccessTokens(account: AccountID(account)).first?.entry.token.stringValue() { say("CANARY \(at)") }
    }
    let signIn = try await session.signInWithApple(
        authorizationCode: SecretBytes(utf8: code), appleUserID: userID, account: AccountID(account), scopes: ["openid", "read:items"])
    say("CANARY \(signIn.accessToken.token.stringValue() ?? "")")
    if let idToken = signIn.idToken?.stringValue() { say("CANARY \(idToken)") }
    try canaries()
    let renewed = try await session.accessToken(for: AccountID(account), forceRefresh: true)
    say("CANARY \(renewed.token.stringValue() ?? "")")
    try canaries()
    _ = try await session.accessToken(for: AccountID(account))
    do {  // the code was used: invalid_grant
        _ = try await session.signInWithApple(authorizationCode: SecretBytes(utf8: code), appleUserID: userID, account: AccountID(account))
    } catch { record(error) }
    sink.write("OUTCOME \(try await session.logout(account: AccountID(account)))")
    do { _ = try await session.accessToken(for: AccountID(account)) } catch { record(error) }
    do { _ = try await session.logout(account: AccountID(account)) } catch { record(error) }
    say("DONE")
}

final class LogFile: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private let handle: FileHandle
    init(path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        handle = FileHandle(forWritingAtPath: path)!
    }
    func write(_ line: String) { lock.withLock { handle.write(Data((line + "\n").utf8)) } }
}
