/// The polkit action file an app ships for ``AccessPolicy/userPresence(_:)``: the one template
/// (`tokenctl polkit-action` prints it for an app id; the tokenctl package's own file,
/// `tokenctl.tokenstore.read.policy`, is made by that command at build time).
package enum PolkitActionFile {
    /// The action the app's store asks polkit for (``PolkitAuthority/actionID(appID:)``).
    package static func actionID(appID: String) -> String {
        PolkitAuthority.actionID(appID: appID)
    }

    /// The file's name under `/usr/share/polkit-1/actions/`: `<action id>.policy`.
    package static func fileName(appID: String) -> String {
        actionID(appID: appID) + ".policy"
    }

    /// The policyconfig document: one action, `auth_self` for every kind of session.
    /// - Parameters:
    ///   - appID: the app id the store is opened with.
    ///   - appName: the name people know the app by, shown in polkit's dialog (XML-escaped here).
    package static func text(appID: String, appName: String) -> String {
        let name = escaped(appName)
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE policyconfig PUBLIC "-//freedesktop//DTD PolicyKit Policy Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/PolicyKit/1/policyconfig.dtd">
            <policyconfig>
              <vendor>\(name)</vendor>
              <action id="\(actionID(appID: appID))">
                <description>Read \(name)'s saved sign-in</description>
                <message>Authentication is required to use your saved \(name) sign-in</message>
                <defaults>
                  <allow_any>auth_self</allow_any>
                  <allow_inactive>auth_self</allow_inactive>
                  <allow_active>auth_self</allow_active>
                </defaults>
              </action>
            </policyconfig>

            """
    }

    private static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }
}
