import Foundation
import TestSupport
import TokenStore

/// `tokenstore-testchild session-lock DIR STORE...`: opens each store (made beforehand, holding
/// the generic item `alice`) with the access policy whenUnlocked, prints
/// `OPEN source=<logind|screensaver|none> locked=<each store's isLocked>`, then reads every store
/// every millisecond and prints `STATE <index> <ok|locked|error:<code>> t=<CLOCK_MONOTONIC ns>`
/// each time a store's answer changes; when DIR/try-unlock appears, calls the first store's
/// `unlock()` once and prints `UNLOCK <ok|locked|error:<code>>`; exits when DIR/quit appears
/// (60 s at most). An open that fails prints `ERROR <code>` and exits 3. With a file
/// DIR/passphrase, the stores are passphrase stores (their keys in `keys/` beside each), so the
/// child needs no Secret Service on its session bus.
func runSessionLockMode(_ args: [String]) throws {
    guard args.count >= 3 else { fail("session-lock DIR STORE...") }
    let directory = args[1]
    let options = TokenStore.Options(accessPolicy: .whenUnlocked)
    let passphrase = FileManager.default.contents(atPath: directory + "/passphrase")
    var stores: [TokenStore] = []
    do {
        for path in args[2...] {
            if let passphrase {
                let provider = PassphraseKeyProvider(
                    directory: URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("keys").path,
                    passphrase: SecretBytes(Array(passphrase)), limits: .interactive)
                stores.append(try TokenStore(path: path, appID: "dev.tokenstore.tests", keyProvider: provider, options: options))
            } else {
                stores.append(try TokenStore(path: path, appID: "dev.tokenstore.tests", options: options))
            }
        }
    } catch let error as TokenStoreError {
        say("ERROR \(error.code.rawValue)")
        exit(3)
    }
    let source = TokenStore.sessionLockSource ?? "none"
    say("OPEN source=\(source) locked=\(stores.map { String($0.isLocked) }.joined(separator: ","))")
    var last = [String](repeating: "", count: stores.count)
    let key = ItemKey(account: AccountID("alice"), kind: .generic)
    let deadline = monotonicNanoseconds() + 60_000_000_000
    var round = 0
    var triedUnlock = false
    while monotonicNanoseconds() < deadline {
        for (index, store) in stores.enumerated() {
            let state: String
            do {
                state = try store.secret(for: key) == nil ? "error:missing" : "ok"
            } catch let error as TokenStoreError {
                state = error.code == .storeLocked ? "locked" : "error:\(error.code.rawValue)"
            }
            if state != last[index] {
                say("STATE \(index) \(state) t=\(monotonicNanoseconds())")
                last[index] = state
            }
        }
        round += 1
        if round % 50 == 0, FileManager.default.fileExists(atPath: directory + "/quit") { return }
        if round % 50 == 0, !triedUnlock, FileManager.default.fileExists(atPath: directory + "/try-unlock") {
            triedUnlock = true
            do {
                try stores[0].unlock()
                say("UNLOCK ok")
            } catch let error as TokenStoreError {
                say("UNLOCK \(error.code == .storeLocked ? "locked" : "error:\(error.code.rawValue)")")
            }
        }
        usleep(1_000)
    }
}
