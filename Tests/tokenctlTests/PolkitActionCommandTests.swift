import Foundation
import TestSupport
import TestTraits
import Testing

/// `tokenctl polkit-action`: the polkit action file an app's package installs for a
/// `userPresence` store (the tokenctl package's own is made by the same command; scripts/deb
/// checks it with polkitd's own parser, pkaction). Nothing is opened: no keyring, no store.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct PolkitActionCommandTests {
    @Test("the file declares the action the store asks polkit for (app id mapped as PolkitAuthority maps it), auth_self, the name escaped")
    func printsTheAppsAction() throws {
        let directory = try TemporaryDirectory()
        let result = try TokenctlBinary.run(
            ["--app-id", "com.Example.My_App", "polkit-action", "--name", "Notes & <Co>"], environment: ["HOME": directory.path])
        #expect(result.exitCode == 0, "\(result.standardError)")
        #expect(result.standardError.contains("/usr/share/polkit-1/actions/com.example.my-app.tokenstore.read.policy"))
        #expect(
            result.standardOutput == """
                <?xml version="1.0" encoding="UTF-8"?>
                <!DOCTYPE policyconfig PUBLIC "-//freedesktop//DTD PolicyKit Policy Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/PolicyKit/1/policyconfig.dtd">
                <policyconfig>
                  <vendor>Notes &amp; &lt;Co&gt;</vendor>
                  <action id="com.example.my-app.tokenstore.read">
                    <description>Read Notes &amp; &lt;Co&gt;'s saved sign-in</description>
                    <message>Authentication is required to use your saved Notes &amp; &lt;Co&gt; sign-in</message>
                    <defaults>
                      <allow_any>auth_self</allow_any>
                      <allow_inactive>auth_self</allow_inactive>
                      <allow_active>auth_self</allow_active>
                    </defaults>
                  </action>
                </policyconfig>

                """)
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/.local"), "nothing is created")
    }

    @Test("--store PATH: the app id every command derives from the path; --json gives actionID, file, policy")
    func derivedAppIDAndJSON() throws {
        let directory = try TemporaryDirectory()
        let result = try TokenctlBinary.run(["--json", "--store", directory.path + "/other/store.sqlite", "polkit-action"])
        #expect(result.exitCode == 0, "\(result.standardError)")
        let object = try #require(JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(object["actionID"] as? String == "tokenctl.tokenstore.read")
        #expect(object["file"] as? String == "tokenctl.tokenstore.read.policy")
        #expect((object["policy"] as? String)?.contains("<action id=\"tokenctl.tokenstore.read\">") == true)
    }

    @Test("a name with a control character is a usage error (64); nothing printed")
    func controlCharacterRefused() throws {
        let result = try TokenctlBinary.run(["--app-id", "a.b", "polkit-action", "--name", "line\nbreak"])
        #expect(result.exitCode == 64)
        #expect(result.standardOutput == "")
    }
}
