import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// input_limits: secrets of 0 B, 1 B, 64 KiB, 1 MiB and 1 MiB + 1; NUL bytes and invalid
/// UTF-8 in secrets (bytes); identifiers with SQL and LIKE metacharacters ('";--, %, _), NUL,
/// Unicode in both normal forms, and at / over the 4 KiB limit (10 KiB ids); labels, scopes and
/// user ids at and over their limits. Over a limit: `invalidInput` and nothing written.
/// Otherwise: an exact round trip (through a reopen).
@Suite("Reliability: input_limits", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct InputLimitsTests {
    @Test("limits enforced with invalidInput; exact round trip otherwise")
    func inputLimits() throws {
        let t = try TestStore()
        let store = t.store
        var cases = 0, failures = 0
        var roundTrips: [(ItemKey, [UInt8], ItemAttributes)] = []

        func accepted(_ name: String, _ itemKey: ItemKey, _ bytes: [UInt8], _ attributes: ItemAttributes = .init()) {
            cases += 1
            do {
                try store.set(SecretBytes(bytes), for: itemKey, attributes: attributes)
                let item = try store.item(for: itemKey)
                if item?.secret.copyBytes() != bytes || item?.key != itemKey || item?.attributes != attributes {
                    failures += 1
                    Issue.record("\(name): did not round-trip exactly")
                }
                roundTrips.append((itemKey, bytes, attributes))
            } catch {
                failures += 1
                Issue.record("\(name): \(error)")
            }
        }
        func refused(_ name: String, _ body: () throws -> Void) {
            cases += 1
            let before = try? store.counts()
            let outcome = outcomeCode(body)
            if outcome != TokenStoreError.Code.invalidInput.rawValue {
                failures += 1
                Issue.record("\(name): \(outcome), expected invalidInput")
            }
            if (try? store.counts()) != before {
                failures += 1
                Issue.record("\(name): something was written")
            }
        }

        // Secret sizes.
        refused("empty secret") { try store.set(SecretBytes([UInt8]()), for: key("alice")) }
        accepted("1 B", key("one", .generic), [0x41])
        accepted("1 B NUL", key("nul1", .generic), [0])
        accepted("64 KiB", key("64k", .generic), (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        accepted("1 MiB exactly", key("1m", .generic), [UInt8](repeating: 0xab, count: StoreLimits.maxSecretBytes))
        refused("1 MiB + 1") { try store.set(SecretBytes([UInt8](repeating: 1, count: StoreLimits.maxSecretBytes + 1)), for: key("alice")) }
        refused("8 MiB") { try store.set(SecretBytes([UInt8](repeating: 1, count: 8 << 20)), for: key("alice")) }
        // NUL bytes and invalid UTF-8 in secrets.
        accepted("NUL inside", key("nul", .generic), Array("a\u{0}b\u{0}".utf8) + [0, 0])
        accepted("lone continuation", key("utf8-1", .generic), [0x80, 0xbf])
        accepted("truncated sequence", key("utf8-2", .generic), [0x61, 0xc3])
        accepted("overlong NUL", key("utf8-3", .generic), [0xc0, 0x80])
        accepted("surrogate", key("utf8-4", .generic), [0xed, 0xa0, 0x80])
        accepted("0xff 0xfe", key("utf8-5", .generic), [0xff, 0xfe, 0x00, 0xff])
        accepted("every byte", key("bytes", .generic), (0...255).map { UInt8($0) })
        // Identifiers.
        let odd = ["'\";--", "%", "_", "%_%", "' OR '1'='1", "a\u{0}b", "\u{0}", "ünïcødé 🙂", "\u{202e}rtl", " ", "\n\t",
                   "é" /* NFC */, "e\u{301}" /* NFD */, String(repeating: "x", count: StoreLimits.maxIdentifierBytes),
                   String(repeating: "é", count: StoreLimits.maxIdentifierBytes / 2)]
        for (index, id) in odd.enumerated() {
            let bytes = Array("secret-\(index)".utf8)
            accepted("account #\(index)", key(id, .generic), bytes)
            accepted("service #\(index)", ItemKey(account: AccountID("svc-account", service: id), kind: .generic), bytes + [1])
        }
        refused("empty account") { try store.set(secret("x"), for: key("")) }
        refused("empty service") { try store.set(secret("x"), for: ItemKey(account: AccountID("a", service: ""), kind: .generic)) }
        refused("account 4 KiB + 1") { try store.set(secret("x"), for: key(String(repeating: "x", count: StoreLimits.maxIdentifierBytes + 1))) }
        refused("account 10 KiB") { try store.set(secret("x"), for: key(String(repeating: "a", count: 10_240))) }
        refused("service 10 KiB") { try store.set(secret("x"), for: ItemKey(account: AccountID("a", service: String(repeating: "s", count: 10_240)), kind: .generic)) }
        refused("account 10 KiB of 2-byte characters") { try store.set(secret("x"), for: key(String(repeating: "é", count: 5_121))) }
        refused("read with a 10 KiB account") { _ = try store.item(for: key(String(repeating: "a", count: 10_240))) }
        refused("delete with a 10 KiB account") { try store.delete(key(String(repeating: "a", count: 10_240))) }
        refused("logout of a 10 KiB account") { _ = try store.ledger.beginLogout(account: AccountID(String(repeating: "a", count: 10_240))) }
        // Attributes.
        accepted("label 1 KiB", key("label", .generic), [1], .init(label: String(repeating: "l", count: StoreLimits.maxLabelBytes)))
        refused("label 1 KiB + 1") { try store.set(secret("x"), for: key("a"), attributes: .init(label: String(repeating: "l", count: StoreLimits.maxLabelBytes + 1))) }
        accepted("256 scopes", key("scopes", .accessToken), [2], .init(expiresAt: Date(timeIntervalSince1970: 2_000_000_000), scopes: (0..<StoreLimits.maxScopes).map { "s\($0)" }))
        refused("257 scopes") { try store.set(secret("x"), for: key("a", .accessToken), attributes: .init(scopes: (0...StoreLimits.maxScopes).map { "s\($0)" })) }
        for bad in ["", "has space", "tab\t", "nl\n", "\u{7f}", String(repeating: "s", count: 257)] {
            refused("scope \(bad.debugDescription.prefix(12))") { try store.set(secret("x"), for: key("a", .accessToken), attributes: .init(scopes: [bad])) }
        }
        // Dates outside years 1–9999, or not a number: refused, never a trap (found in review).
        let badDates: [(String, Double)] = [("NaN", .nan), ("+inf", .infinity), ("-inf", -.infinity), ("year 20000", 5.7e11), ("1e300", 1e300)]
        for (name, seconds) in badDates {
            let date = Date(timeIntervalSince1970: seconds)
            refused("expiry \(name)") { try store.set(secret("x"), for: key("a", .accessToken), attributes: .init(expiresAt: date)) }
            refused("sign-in with an access token expiring \(name)") {
                try store.ledger.saveSignIn(account: "a", refreshToken: secret("rt"), appleUserID: "u",
                                     accessToken: AccessTokenEntry(token: secret("at"), expiresAt: date, scopes: []))
            }
        }
        accepted("expiry in year 9999", key("y9999", .accessToken), [3], .init(expiresAt: Date(timeIntervalSince1970: 253_402_300_000)))
        accepted("expiry in year 1", key("y1", .accessToken), [4], .init(expiresAt: Date(timeIntervalSince1970: -62_135_596_000)))
        // User ids and the session operations.
        refused("empty user id") { _ = try store.credentialState(forUserID: "") }
        refused("10 KiB user id") { try store.recordCredentialState(.authorized, forUserID: String(repeating: "u", count: 10_240), reason: .signIn) }
        refused("sign-in with a 10 KiB user id") { try store.ledger.saveSignIn(account: "a", refreshToken: secret("rt"), appleUserID: String(repeating: "u", count: 10_240), accessToken: nil) }
        refused("sign-in with an empty refresh token") { try store.ledger.saveSignIn(account: "a", refreshToken: SecretBytes([UInt8]()), appleUserID: "u", accessToken: nil) }
        refused("sign-in with an oversize access token") {
            try store.ledger.saveSignIn(account: "a", refreshToken: secret("rt"), appleUserID: "u",
                                 accessToken: AccessTokenEntry(token: SecretBytes([UInt8](repeating: 1, count: StoreLimits.maxSecretBytes + 1)), expiresAt: Date(), scopes: []))
        }
        refused("rotation to an empty token") {
            _ = try store.ledger.replaceRefreshToken(account: "a", presented: secret("rt"), with: SecretBytes([UInt8]()),
                                              accessToken: AccessTokenEntry(token: secret("at"), expiresAt: Date(), scopes: []))
        }
        do {  // an outbox entry's next attempt at a date out of range: refused, the entry untouched
            try store.ledger.saveSignIn(account: "dates", refreshToken: secret("rt-dates"), appleUserID: "u-dates", accessToken: nil)
            guard case .queued(let entries) = try store.ledger.beginLogout(account: "dates") else { throw TokenStoreError(.ioError, "not queued") }
            refused("next attempt NaN") {
                try store.ledger.recordRevocationAttempt(entries[0], result: .retryLater(error: "x", nextAttemptAt: Date(timeIntervalSince1970: .nan)))
            }
            cases += 1
            let due = try store.pendingRevocations(dueBy: Date(timeIntervalSince1970: .infinity))  // a query: saturates
            if due.map(\.attempts) != [0] {
                failures += 1
                Issue.record("the refused attempt changed the entry, or a far due date lost it: \(due.map(\.attempts))")
            }
        } catch {
            failures += 1
            Issue.record("outbox dates: \(error)")
        }
        refused("reason with a space") { try store.recordCredentialState(.revoked, forUserID: "u", reason: .init(rawValue: "has space")) }
        refused("app id with a slash") { _ = try TokenStore(path: t.path, appID: "../evil") }
        refused("empty app id") { _ = try TokenStore(path: t.path, appID: "") }
        cases += 1
        do {  // odd user ids round-trip through sign-in
            for (index, id) in ["'\";--", "%_", "a\u{0}b", String(repeating: "u", count: StoreLimits.maxIdentifierBytes)].enumerated() {
                try store.ledger.saveSignIn(account: AccountID("user-\(index)"), refreshToken: secret("rt-\(index)"), appleUserID: id, accessToken: nil)
                if try store.appleUserID(account: AccountID("user-\(index)")) != id || store.credentialState(forUserID: id) != .authorized
                    || store.accounts(forAppleUserID: id).map(\.name) != ["user-\(index)"] {
                    failures += 1
                    Issue.record("user id #\(index) did not round-trip")
                }
            }
        } catch {
            failures += 1
            Issue.record("user ids: \(error)")
        }

        // Everything accepted reads back exactly after a reopen; NFC and NFD stay two items.
        let reopened = try t.reopen()
        for (itemKey, bytes, attributes) in roundTrips {
            let item = try reopened.item(for: itemKey)
            if item?.secret.copyBytes() != bytes || item?.attributes != attributes {
                failures += 1
                Issue.record("\(itemKey.kind) item of a \(itemKey.account.name.utf8.count)-byte account changed after reopening")
            }
        }
        #expect(try reopened.secret(for: key("é", .generic))?.copyBytes() != reopened.secret(for: key("e\u{301}", .generic))?.copyBytes())
        #expect(try reopened.verify().isHealthy)

        Reliability.metric("input_limits", ["cases": cases, "round_trips": roundTrips.count, "failures": failures])
        #expect(failures == 0)
        #expect(cases >= 60)
    }
}
