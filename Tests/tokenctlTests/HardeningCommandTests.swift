import Foundation
import TestTraits
import Testing
import TestSupport

/// Review findings 1 and 13 through the binary, as the review ran them.
@Suite("tokenctl hardening", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct HardeningCommandTests {
    /// Finding 1: after `CREATE TRIGGER … BEFORE INSERT ON pending_revocations … RAISE(IGNORE)`
    /// `tokenctl logout` printed "revoked" while the server got 0 revocation requests and the
    /// refresh token was gone locally; `verify` said "bad rows 0". Now logout and verify exit 65
    /// (schemaTampered), the server gets nothing, and nothing is deleted.
    @Test("a planted trigger: logout and verify exit 65 schemaTampered; 0 revocations; nothing deleted")
    func plantedTriggerStopsTheLogout() throws {
        let fixture = try SessionCommandTests.Fixture()
        let login = try fixture.login(account: "alice", userID: "000111.\(UUID().uuidString.prefix(8)).apple")
        #expect(login.exitCode == 0, "\(login.standardError)")
        _ = try fixture.store.sqlite("CREATE TRIGGER t BEFORE INSERT ON pending_revocations BEGIN SELECT RAISE(IGNORE); END;")
        let items = try fixture.store.sqlite("SELECT count(*) FROM items")
        let revocationsBefore = try fixture.server.stats().revocations

        let logout = try fixture.run(["logout", "--account", "alice"])
        #expect(logout.exitCode == 65, "\(logout.standardOutput) \(logout.standardError)")
        #expect(logout.standardError.contains("schemaTampered"), "\(logout.standardError)")
        #expect(!logout.standardOutput.contains("revoked"))
        #expect(try fixture.server.stats().revocations == revocationsBefore, "no revocation request reached the server")
        #expect(try fixture.store.sqlite("SELECT count(*) FROM items") == items, "nothing was deleted")
        #expect(try fixture.store.sqlite("SELECT count(*) FROM pending_revocations") == "0")

        let verify = try fixture.run(["verify"])
        #expect(verify.exitCode == 65)
        #expect(verify.standardError.contains("schemaTampered"), "\(verify.standardError)")
    }

    /// Finding 13: an account name with `ESC ] 0 ; pwned BEL` (a window-title escape) and a
    /// newline reached the terminal raw through `list`. Text output now shows escapes; JSON
    /// output keeps the exact name.
    @Test("control characters in names and labels are escaped in text output, exact in JSON")
    func terminalEscapesAreEscaped() throws {
        let store = try TokenctlStore()
        let account = "evil\u{1b}]0;pwned\u{07}\nsecond line"
        let label = "label\u{1b}[2J\u{9b}31m\u{202e}"
        let put = try store.run(["put", "--account", account, "--kind", "generic", "--label", label], stdin: "s\n")
        #expect(put.exitCode == 0, "\(put.standardError)")

        for arguments in [["list"], ["get", "--account", account, "--kind", "generic"]] {
            let result = try store.run(arguments)
            #expect(result.exitCode == 0, "\(result.standardError)")
            let output = result.standardOutput
            let raw = output.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7f...0x9f).contains($0.value) || $0.value == 0x202e }
            #expect(raw.isEmpty, "\(arguments[0]): raw control characters reached the terminal")
            #expect(output.contains("evil\\x1b]0;pwned\\x07\\x0asecond line"), "\(output)")
            #expect(!output.contains("\nsecond line"), "the newline forged a line")
            if arguments[0] == "get" { #expect(output.contains("label\\x1b[2J\\x9b31m\\u{202e}"), "\(output)") }
        }
        let json = try store.json(["list"])
        let items = json.object["items"] as? [[String: Any]] ?? []
        #expect(items.first?["account"] as? String == account, "JSON keeps the exact name")
    }
}
