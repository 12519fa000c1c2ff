import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// plaintext_scan: tokens, user ids, account and service names, labels and scopes carrying
/// unique canaries go through every store operation with a trace-level logger capturing
/// every line; then the database, -wal, -shm and every other file in the store directory,
/// the captured log, and the description of every error that can be provoked are searched.
/// A second part runs sign-in → renewal (rotation) → logout through TokenSession against the
/// real authorization server in a child process with a trace logger writing to a file, and
/// scans that store directory and log the same way. No canary may appear anywhere.
@Suite("Reliability: plaintext_scan", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct PlaintextScanTests {
    final class Capture: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var text: String { lock.withLock { lines.joined(separator: "\n") } }
        var count: Int { lock.withLock { lines.count } }
    }

    struct Scan {
        var canaries: [String] = []
        var streams = 0
        var bytes = 0
        var hits: [String] = []

        mutating func scan(_ name: String, _ data: Data) {
            streams += 1
            bytes += data.count
            for canary in canaries where data.range(of: Data(canary.utf8)) != nil {
                hits.append("\(canary.prefix(14))… in \(name)")
            }
        }
        mutating func scan(_ name: String, _ text: String) { scan(name, Data(text.utf8)) }

        /// Values the API hands back to the app may name the app's own accounts; they must
        /// still never show a secret (SecretBytes prints a fingerprint).
        mutating func scanForSecrets(_ name: String, _ text: String, secrets: [String]) {
            streams += 1
            bytes += text.utf8.count
            for canary in secrets where text.contains(canary) { hits.append("\(canary.prefix(14))… in \(name)") }
        }

        /// Every regular file in `directory` (the db, -wal, -shm, lock and temporary files).
        mutating func scanDirectory(_ directory: String, label: String) -> [String] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for name in names.sorted() {
                if let data = FileManager.default.contents(atPath: directory + "/" + name) { scan("\(label)/\(name)", data) }
            }
            return names
        }
    }

    static func canary(_ tag: String) -> String { "CANARY\(tag)\(UUID().uuidString.replacingOccurrences(of: "-", with: ""))" }

    @Test("canaries never appear in files, logs or error descriptions")
    func plaintextScan() throws {
        let capture = Capture()
        let logger = TokenStoreLogger(label: "scan", level: .trace) { capture.add($0.description) }
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, logger: logger)

        let account = Self.canary("ACCT"), service = Self.canary("SVC"), user = Self.canary("USER")
        let refresh = Self.canary("RT"), rotated = Self.canary("RT2"), access = Self.canary("AT")
        let generic = Self.canary("GEN"), label = Self.canary("LABEL"), scope = Self.canary("SCOPE").lowercased()
        let otherAccount = Self.canary("ACCT2"), otherToken = Self.canary("RT3")
        var scan = Scan(canaries: [account, service, user, refresh, rotated, access, generic, label, scope, otherAccount, otherToken])
        let secrets = [refresh, rotated, access, generic, otherToken]
        var errors: [String] = []
        func provoke(_ body: () throws -> Void) {
            do { try body() } catch {
                errors.append("\(error)")
                errors.append(String(reflecting: error))
                if let error = error as? TokenStoreError {
                    errors.append(error.message + (error.hint ?? "") + (error.cause.map { "\($0)" } ?? ""))
                }
            }
        }

        // Every operation, with canaries in every field.
        try store.ledger.saveSignIn(
            account: AccountID(account, service: service), refreshToken: secret(refresh), appleUserID: user,
            accessToken: AccessTokenEntry(token: secret(access), expiresAt: Date() + 3600, scopes: ["openid", scope]))
        try store.set(secret(generic), for: key(account, .generic, service: service), attributes: .init(label: label))
        #expect(try store.ledger.replaceRefreshToken(
            account: AccountID(account, service: service), presented: secret(refresh), with: secret(rotated),
            accessToken: AccessTokenEntry(token: secret(access), expiresAt: Date() + 3600, scopes: [scope])) == .stored)
        _ = try store.ledger.cachedAccessTokens(account: AccountID(account, service: service)).first?.entry
        _ = try store.appleUserID(account: AccountID(account, service: service))
        _ = try store.accounts(forAppleUserID: user)
        _ = try store.items()
        _ = try store.accounts()
        _ = try store.credentialState(forUserID: user)
        _ = try store.credentialStateHistory(forUserID: user)
        try store.ledger.saveSignIn(account: AccountID(otherAccount), refreshToken: secret(otherToken), appleUserID: user, accessToken: nil)
        scan.scanForSecrets(
            "descriptions of returned values",
            "\(try store.items()) \(try store.counts()) \(try store.verify()) \(try store.item(for: key(account, .generic, service: service)) as Any) \(try store.ledger.cachedAccessTokens(account: AccountID(account, service: service)).first?.entry as Any)",
            secrets: secrets)

        // Errors: invalid input carrying canaries, a tampered row, a wrong key, a closed store.
        provoke { try store.set(secret(generic), for: key(String(repeating: account, count: 200), .generic)) }
        provoke { try store.set(SecretBytes([UInt8]()), for: key(account, .generic, service: service)) }
        provoke { try store.set(secret(generic), for: key(account, .generic), attributes: .init(label: String(repeating: label, count: 40))) }
        provoke { try store.set(secret(generic), for: key(account, .accessToken), attributes: .init(scopes: [scope + " x"])) }
        provoke { try store.ledger.saveSignIn(account: AccountID(account), refreshToken: secret(refresh), appleUserID: String(repeating: user, count: 200), accessToken: nil) }
        provoke { _ = try store.credentialState(forUserID: "") }
        provoke { try store.recordCredentialState(.revoked, forUserID: user, reason: .init(rawValue: scope + " x")) }
        provoke { _ = try store.ledger.replaceRefreshToken(account: AccountID(account, service: service), presented: secret(refresh), with: SecretBytes([UInt8]()), accessToken: AccessTokenEntry(token: secret(access), expiresAt: Date(), scopes: [])) }
        let raw = try Database(path: path)
        let tamperedLookup = store.connection.envelope.itemLookup(key(account, service: service))
        let sealed = try #require(try raw.firstRow("SELECT sealed FROM items WHERE lookup = ?", [.blob(tamperedLookup)]) { $0.blob(0) })
        try raw.run("UPDATE items SET sealed = ? WHERE lookup = ?", [.blob(sealed + [0]), .blob(tamperedLookup)])
        provoke { _ = try store.refreshToken(account: AccountID(account, service: service)) }
        provoke { _ = try store.items() }
        provoke { _ = try store.ledger.beginLogout(account: AccountID(account, service: service)) }
        scan.scan("verify report", "\(try store.verify())")
        try raw.run("UPDATE items SET sealed = ? WHERE lookup = ?", [.blob(sealed), .blob(tamperedLookup)])
        let preparation = try store.ledger.beginLogout(account: AccountID(account, service: service))
        scan.scanForSecrets("logout preparation", "\(preparation)", secrets: secrets)
        if case .queued(let entries) = preparation, let entry = entries.first {
            scan.scanForSecrets("pending entry", "\(entry)", secrets: secrets)
            try store.ledger.recordRevocationAttempt(entry, result: .retryLater(error: "network down", nextAttemptAt: Date()))
            try store.ledger.recordRevocationAttempt(entry, result: .revoked)
        } else {
            Issue.record("logout queued nothing: \(preparation)")
        }
        let reference = DataKeyReference(storeID: store.storeIdentifier, keyID: store.keyIdentifier, appID: testAppID)
        let openNames = scan.scanDirectory((path as NSString).deletingLastPathComponent, label: "open")
        store.close()
        provoke { _ = try store.items() }
        let material = try #require(try SecretServiceKeyProvider().loadKey(reference))
        try SecretServiceKeyProvider().storeKey(.random(count: 32), for: reference)
        provoke { _ = try TokenStore(path: path, appID: testAppID, logger: logger) }
        try SecretServiceKeyProvider().storeKey(material, for: reference)
        let closedNames = scan.scanDirectory((path as NSString).deletingLastPathComponent, label: "closed")
        #expect(openNames.contains("tokens.sqlite-wal"), "\(openNames)")

        for (index, text) in errors.enumerated() { scan.scan("error \(index)", text) }
        scan.scan("log (\(capture.count) lines)", capture.text)
        #expect(errors.count >= 30, "\(errors.count) error texts")
        #expect(capture.count > 0, "the trace logger saw the operations")

        // The session layer, in a child, against the real server.
        let session = try sessionScan()
        scan.canaries += session.canaries
        var sessionFiles = 0
        for name in session.files { if let data = FileManager.default.contents(atPath: session.directory + "/" + name) { scan.scan("session/\(name)", data); sessionFiles += 1 } }
        scan.scan("session log", session.log)
        #expect(session.files.contains { $0.hasSuffix(".renewal-lock") }, "\(session.files)")

        Reliability.metric("plaintext_scan", [
            "canaries": scan.canaries.count, "streams_scanned": scan.streams, "bytes_scanned": scan.bytes,
            "files": openNames.count + closedNames.count + sessionFiles, "error_texts": errors.count,
            "log_lines": capture.count + session.log.split(separator: "\n").count, "hits": scan.hits.count,
        ])
        #expect(scan.hits.isEmpty, "\(scan.hits)")
    }

    struct SessionScan {
        let canaries: [String]
        let directory: String
        let files: [String]
        let log: String
        let keep: TemporaryDirectory
    }

    /// Sign-in, renewal with rotation, logout and the errors after it, in the test child with a trace logger.
    func sessionScan() throws -> SessionScan {
        let server = try AuthorizationServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let logPath = directory.appending("session.log").path
        let account = Self.canary("SACCT"), user = Self.canary("SUSER")
        let code = try server.appleAuthorizationCode(for: user)
        let result = try runChild(
            try Reliability.child(), ["scan-session", path, server.baseURL.absoluteString, logPath, account, user, code], timeout: 120)
        #expect(result.status == 0, "scan-session: \(result.stderr)")
        #expect(result.stdout.contains("DONE"), "\(result.stdout)")
        let tokens = result.stdout.split(separator: "\n").filter { $0.hasPrefix("CANARY ") }.map { String($0.dropFirst(7)) }.filter { $0.count >= 8 }
        #expect(tokens.count >= 5, "tokens seen: \(tokens.count)")
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        #expect(log.contains("ERROR "), "errors were provoked and logged")
        let storeDir = (path as NSString).deletingLastPathComponent
        return SessionScan(
            canaries: [account, user, code] + tokens, directory: storeDir,
            files: (try? FileManager.default.contentsOfDirectory(atPath: storeDir)) ?? [], log: log, keep: directory)
    }
}
