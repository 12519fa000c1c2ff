import Foundation
import Testing
import TestSupport

/// New-user trial 2: a mistyped account for logout said only "Nothing was stored for this
/// account" and for token "sign in again": neither pointed at the name.
extension SessionCommandTests {
    @Test("logout and token with a mistyped account point at the name: 'tokenctl accounts', a close name; logout still exits 0")
    func mistypedAccount() throws {
        let fixture = try Fixture()
        #expect(try fixture.login(account: "alice", userID: "000711.\(UUID().uuidString.prefix(8)).apple").exitCode == 0)

        let logout = try fixture.run(["logout", "--account", "alcie"])
        #expect(logout.exitCode == 0, "\(logout.standardError)")
        #expect(logout.standardOutput.hasPrefix("notFound\nNothing was stored for this account; no request was made."))
        #expect(logout.standardOutput.contains("No account of that name is in this store: 'tokenctl accounts' lists them (did you mean 'alice'?)."),
            "\(logout.standardOutput)")
        let far = try fixture.run(["logout", "--account", "zed"])
        #expect(far.exitCode == 0 && far.standardOutput.contains("'tokenctl accounts' lists them.") && !far.standardOutput.contains("did you mean"),
            "\(far.standardOutput)")

        let token = try fixture.run(["token", "--account", "alcie"])
        #expect(token.exitCode == 1, "\(token.standardError)")
        #expect(token.standardError.contains("[interactionRequired]"))
        #expect(token.standardError.contains("no account of that name is in this store now: if it is mistyped, 'tokenctl accounts' lists the accounts (one has a close name)"),
            "\(token.standardError)")
        #expect(!token.standardError.contains("alice") && !token.standardError.contains("alcie"), "stderr names no account")
        // alice is still signed in.
        #expect(try fixture.run(["token", "--account", "alice"]).exitCode == 0)
    }
}
