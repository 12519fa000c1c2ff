// The app-side names README.md's Swift blocks use without defining them (scripts/test-readme-swift
// compiles the blocks with this file). Stand-ins only: what matters is that the blocks' calls to
// TokenStore and AuthSession compile as written.
import AuthSession
import FoundationEssentials
import TokenStore

/// Shows the sign-in link for a user whose browser did not open.
func showCopyableLink(_ url: URL) {}

/// The app's logging.
func log(_ value: some Any) {}

/// An HTTP request the app is about to send.
final class AppRequest: Sendable {
    func setValue(_ value: String, forHTTPHeaderField field: String) {}
}
let request = AppRequest()

/// The Apple user id the app kept from its sign-in (`SignInResult.userID`).
let userID = ""

/// The store, a secret and its key, as an app has them where the error example runs.
let store = try! TokenStore(appID: "com.example.notes")
let secret = SecretBytes(utf8: "")
let key = ItemKey(account: "notes", kind: .generic)

/// The `DPoP-Nonce` header of an API's answer.
let dpopNonce = "n"

/// The session of the README's first session example, and the loopback redirect URIs it signs in with.
let session = TokenSession(
    store: store, configuration: try! AuthorizationServerConfiguration(domain: "https://example.eu.auth0.com", clientID: "…"))
let uris = [53180, 53181, 53182].map { URL(string: "http://127.0.0.1:\($0)/callback")! }
