import Foundation
import TestTraits
import Testing
import TestSupport

/// Issue 15, finding 7 through the binary: a copy of the store file put back after an offline
/// logout undid it without a trace (`state` authorized, `pending` empty, `verify` ok). Now
/// every command that opens the store exits 65 (`storeRolledBack`) with the way out.
@Suite("tokenctl on a rolled-back store", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct RollbackCommandTests {
    typealias Fixture = SessionCommandTests.Fixture

    @Test("login, copy the files, logout offline, put the copy back: 65 with the hint, nothing deleted; status names it; reset recovers")
    func rolledBackCopy() throws {
        let fixture = try Fixture()
        let userID = "000123.\(UUID().uuidString.prefix(8)).apple"
        #expect(try fixture.login(account: "alice", userID: userID).exitCode == 0)
        let path = fixture.store.path
        var copy: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm"] { copy[path + suffix] = FileManager.default.contents(atPath: path + suffix) }

        fixture.server.stopTemporarily()
        #expect(try fixture.run(["logout", "--account", "alice"]).exitCode == 75)
        // One raise: the outbox insert's (the logout's first step). The failed attempt's
        // transaction, which records the user `revoked` (revocation pending), settles the logout
        // that step began and is covered by its raise (EpochRaisingChange): one keyring write.
        let logoutEpoch = try fixture.json(["verify"]).object["epoch"] as? [String: Any] ?? [:]
        #expect(logoutEpoch["file"] as? Int == 1 && logoutEpoch["keyProvider"] as? Int == 1, "\(logoutEpoch)")

        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        for (file, data) in copy {
            #expect(FileManager.default.createFile(atPath: file, contents: data, attributes: [.posixPermissions: 0o600]))
        }
        for command in [["state", userID], ["list"], ["pending"], ["verify"], ["token", "--account", "alice"]] {
            let result = try fixture.run(command)
            #expect(result.exitCode == 65, "\(command): \(result.exitCode) \(result.standardError)")
            #expect(result.standardError.contains("[storeRolledBack]"), "\(command): \(result.standardError)")
            #expect(result.standardError.contains("hint: ") && result.standardError.contains("tokenctl reset --yes"))
            #expect(!result.standardError.contains(userID) && !result.standardError.contains("alice"))
        }
        // Nothing was deleted by the refused opens: the copy's refresh token is still in it.
        #expect(try fixture.store.sqlite("SELECT count(*) FROM items WHERE kind = 1") == "1")

        let status = try fixture.json(["status"])
        #expect(status.result.exitCode == 0)
        let epoch = status.object["epoch"] as? [String: Any] ?? [:]
        #expect(epoch["file"] as? Int == 0 && epoch["keyProvider"] as? Int == 1, "\(epoch)")
        #expect((status.object["keyStateExplanation"] as? String)?.contains("restored from an older copy") == true)
        #expect(try fixture.run(["status"]).standardOutput.contains("file 0, key provider 1"))

        #expect(try fixture.run(["reset", "--yes"]).exitCode == 0)
        let verify = try fixture.run(["verify"])
        #expect(verify.exitCode == 0, "\(verify.standardError)")
        #expect(verify.standardOutput.contains("file 1, key provider 1"), "\(verify.standardOutput)")
        #expect(try fixture.run(["state", userID]).exitCode == 0)
    }
}
