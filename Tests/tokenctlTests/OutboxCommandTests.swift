import Foundation
import TestTraits
import Testing
import TestSupport

/// Findings 3, 4 and 6 through the binary: `resume --include-failed`, `pending` listing an
/// unreadable row, `discard --entry`, `verify` on an edited schedule.
@Suite("tokenctl outbox commands", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct OutboxCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    /// Finding 3: after a 307 flagged the entry, `resume` printed "left in the outbox 1" and
    /// exited 0, and nothing ever retried it. Now it exits 1 while the flag stands, and
    /// `--include-failed` revokes it.
    @Test("a redirect flags the entry: resume exits 1 and leaves it; resume --include-failed revokes it, exit 0")
    func includeFailed() throws {
        let fixture = try Fixture()
        let userID = "000777.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        try fixture.server.inject(.redirect(to: "http://127.0.0.1:9/portal", path: "/oauth/revoke"))
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 1)

        let before = try fixture.server.stats().revokeRequests
        let resume = try fixture.json(["resume"])
        #expect(resume.result.exitCode == 1, "\(resume.result.standardError)")
        expectKeys(resume.object, ["revoked", "stillPending", "failed", "notDue", "unreadable", "flagged", "remaining"])
        #expect(resume.object["flagged"] as? Int == 1)
        #expect(try fixture.server.stats().revokeRequests == before)

        let forced = try fixture.json(["resume", "--include-failed"])
        #expect(forced.result.exitCode == 0, "\(forced.result.standardError)")
        #expect(forced.object["revoked"] as? Int == 1)
        #expect(forced.object["remaining"] as? Int == 0)
        let reasons = (try fixture.json(["history", userID]).object["transitions"] as? [[String: Any]] ?? []).map { $0["reason"] as? String }
        #expect(reasons.last == "revocationConfirmed", "\(reasons)")
    }

    /// Finding 6: one flipped bit in one of two entries made `resume` and `pending` exit 65
    /// before any request, and no command could remove the row short of `reset`.
    @Test("a damaged entry: pending lists it by id (65), resume revokes the other (65), discard --entry removes it")
    func damagedEntry() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000888.a.apple").exitCode == 0)
        #expect(try fixture.login(account: "bob", userID: "000999.b.apple").exitCode == 0)
        fixture.server.stopTemporarily()
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 75)
        #expect(try fixture.run(["logout", "--account", "bob"]).exitCode == 75)
        let entries = try fixture.json(["pending"]).object["entries"] as? [[String: Any]] ?? []
        let bobID = try #require(entries.first { $0["account"] as? String == "bob" }?["id"] as? String)
        let sealed = Array(try fixture.store.sqlite("SELECT hex(sealed) FROM pending_revocations WHERE hex(entry_id) = '\(bobID.uppercased())'"))
        var tampered = sealed
        tampered[sealed.count / 2] = tampered[sealed.count / 2] == "0" ? "1" : "0"
        _ = try fixture.store.sqlite(
            "UPDATE pending_revocations SET sealed = X'\(String(tampered))' WHERE hex(entry_id) = '\(bobID.uppercased())'")

        let pending = try fixture.run(["pending"])
        #expect(pending.exitCode == 65)
        #expect(pending.standardOutput.contains("\(bobID) [UNREADABLE]"), "\(pending.standardOutput)")
        #expect(pending.standardOutput.hasPrefix("ACCOUNT  ATTEMPTS  NEXT ATTEMPT"))

        try fixture.server.restart()
        let before = try fixture.server.stats().revocations
        // --all: alice's entry may not be due yet (its backoff from the failed logout can
        // outlast the server's restart on a fast run), which is not what this test is about.
        let resume = try fixture.json(["resume", "--all"])
        #expect(resume.result.exitCode == 65, "\(resume.result.standardError)")
        #expect(resume.object["revoked"] as? Int == 1)
        #expect(resume.object["unreadable"] as? Int == 1)
        #expect(try fixture.server.stats().revocations == before + 1)

        let discard = try fixture.json(["discard", "--entry", bobID])
        #expect(discard.result.exitCode == 0, "\(discard.result.standardError)")
        #expect(discard.object["unreadable"] as? Bool == true)
        #expect(try fixture.run(["pending"]).standardOutput == "No pending revocations.\n")
        #expect(try fixture.run(["discard", "--entry", bobID]).exitCode == 1)
        #expect(try fixture.run(["verify"]).exitCode == 0)
    }

    /// Finding 4: `UPDATE pending_revocations SET failed_code = 'invalidClient'` stopped the
    /// revocation and `verify` said ok (exit 0).
    @Test("a schedule edited with sqlite3: verify exits 65 naming pending_revocations")
    func editedSchedule() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000123.c.apple").exitCode == 0)
        fixture.server.stopTemporarily()
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 75)
        #expect(try fixture.run(["verify"]).exitCode == 0)
        _ = try fixture.store.sqlite("UPDATE pending_revocations SET failed_code = 'invalidClient'")
        let verify = try fixture.run(["verify"])
        #expect(verify.exitCode == 65)
        #expect(verify.standardOutput.contains("pending_revocations"), "\(verify.standardOutput)")
        _ = try fixture.store.sqlite("UPDATE credential_history SET reason = 'signIn'")
        #expect(try fixture.run(["verify"]).standardOutput.contains("credential_history"))
    }
}
