// A child process for the multi-process and crash tests. Not a product.
//
//   tokenstore-testchild open STORE              open (creating) the store; print the counts
//   tokenstore-testchild put-loop STORE SEED N   upsert/delete in a loop, printing "ACK <account> <value|->"
//                                                after each committed write
//   tokenstore-testchild pending STORE           print the number of pending revocations
//   tokenstore-testchild logout STORE URL ACCOUNT        log out; print the outcome
//   tokenstore-testchild resume STORE URL                resume pending revocations; print the report
//   tokenstore-testchild acquire STORE URL ACCOUNT N [force]   N concurrent silent acquisitions (minimum
//                                                      TTL 5 s, or forced refreshes); print each result
//   tokenstore-testchild first-use TAG N         N threads store, load and delete a key each, released at once
//                                                (the process's first libsecret calls); print "FIRST-USE ok=<n> failed=<n>"
//   tokenstore-testchild watch STORE IDLE_MS      print each change to the store (see WatchMode.swift)
//   tokenstore-testchild lock-wait STORE DIR     open, read; lock when DIR/go-lock appears (LockWaitMode.swift)
//   tokenstore-testchild session-lock DIR STORE...   open whenUnlocked, follow each store's reads (SessionLockMode.swift)
//   tokenstore-testchild harden -                TokenStore.hardenProcess(), then print "HARDEN dumpable=<before>/<after>
//                                                core=<soft> <hard>" (PR_GET_DUMPABLE, /proc/self/limits)
// Crash points are armed with TOKENSTORE_CRASH_POINT=<name> (debug builds).
import AuthSession
internal import CGlibcExtensions
import Foundation
import TestSupport
import TokenStore

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("testchild: \(message)\n".utf8))
    exit(2)
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first, args.count >= 2 else { fail("usage: tokenstore-testchild MODE STORE ...") }
let storePath = args[1]

do {
    switch mode {
    case "open":
        let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
        let counts = try store.counts()
        say("OK items=\(counts.items)")
    case "put-loop":
        guard args.count >= 4, let seed = UInt64(args[2]), let count = Int(args[3]) else { fail("put-loop STORE SEED N") }
        var rng = SeededGenerator(seed: seed)
        let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
        for n in 0..<count {
            let account = "acct-\(rng.next() % 16)"
            let key = ItemKey(account: AccountID(account), kind: .refreshToken)
            if rng.next() % 5 == 0 {
                try store.delete(key)
                say("ACK \(account) -")
            } else {
                let value = "rt-\(seed)-\(n)"
                try store.set(SecretBytes(utf8: value), for: key)
                say("ACK \(account) \(value)")
            }
        }
    case "pending":
        let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
        say("PENDING \(try store.pendingRevocations().count)")
    case "logout", "resume", "acquire":
        guard args.count >= 3 else { fail("\(mode) STORE URL ...") }
        let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
        let policy = RetryPolicy(maximumAttempts: 2, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50),
                                 maximumRetryAfter: .seconds(2), maximumTotalTime: .seconds(5))
        let session = TokenSession(
            store: store, configuration: try AuthorizationServerConfiguration(domain: args[2], clientID: "tokenstore-test"),
            retryPolicy: policy)
        switch mode {
        case "logout":
            say("OUTCOME \(try await session.logout(account: AccountID(args[3])))")
        case "resume":
            say("REPORT \(try await session.logoutCoordinator.resumePendingRevocations())")
        default:
            let callers = Int(args[4]) ?? 1
            let force = args.count > 5 && args[5] == "force"
            let lines = await withTaskGroup(of: String.self) { group in
                for _ in 0..<callers {
                    group.addTask {
                        do {
                            let token = try await session.accessToken(
                                for: AccountID(args[3]), minimumTTL: .seconds(5), forceRefresh: force)
                            return "TOKEN \(token.source.rawValue)"
                        } catch let error as AuthSessionError {
                            return "ERROR \(error.code.rawValue)"
                        } catch {
                            return "ERROR other"
                        }
                    }
                }
                var lines: [String] = []
                for await line in group { lines.append(line) }
                return lines
            }
            say(lines.joined(separator: "\n"))
        }
    case "harden":
        let before = tokenstore_is_dumpable()
        try TokenStore.hardenProcess()
        try TokenStore.hardenProcess()  // again: harmless
        let limits = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }?
            .split(separator: " ").dropFirst(4).prefix(2).joined(separator: " ") ?? "?"
        say("HARDEN dumpable=\(before)/\(tokenstore_is_dumpable()) core=\(core)")
    case "first-use":
        guard args.count >= 3, let threads = Int(args[2]) else { fail("first-use TAG N") }
        let ok = firstUse(directory: storePath, threads: threads)
        say("FIRST-USE ok=\(ok) failed=\(threads - ok)")
    case "crash-loop", "mp-worker", "open-batch", "umask-open", "scan-session":
        try await runReliabilityMode(mode, args)
    case "km-rotate", "km-open-default":
        try runKeyManagementMode(mode, args)
    case "watch":
        try runWatchMode(args)
    case "lock-wait":
        try runLockWaitMode(args)
    case "session-lock":
        try runSessionLockMode(args)
    default:
        fail("unknown mode")
    }
} catch {
    FileHandle.standardError.write(Data("testchild: error: \(error)\n".utf8))
    exit(1)
}


/// Stores, loads and deletes one key from each of `threads` threads, released together, so the
/// process's first libsecret calls race. Returns how many threads succeeded.
func firstUse(directory: String, threads: Int) -> Int {
    final class Tally: @unchecked Sendable {  // `ok` is guarded by `lock`
        let lock = NSLock()
        var ok = 0
    }
    let tally = Tally()
    let start = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    for n in 0..<threads {
        group.enter()
        Thread {
            start.wait()
            do {
                // The provider directly: nothing before the first libsecret call to stagger the threads.
                let provider = SecretServiceKeyProvider()
                let reference = DataKeyReference(
                    storeID: "first-use-\(directory.hashValue)", keyID: "key-\(n)", appID: "dev.tokenstore.tests")
                let key = SecretBytes(utf8: String(repeating: "k", count: 32))
                try provider.storeKey(key, for: reference)
                if try provider.loadKey(reference) == key { tally.lock.withLock { tally.ok += 1 } }
                try provider.deleteKey(reference)
            } catch {
                FileHandle.standardError.write(Data("testchild: store \(n): \(error)\n".utf8))
            }
            group.leave()
        }.start()
    }
    for _ in 0..<threads { start.signal() }
    group.wait()
    return tally.ok
}
