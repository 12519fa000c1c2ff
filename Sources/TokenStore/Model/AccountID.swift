/// An account of the store: a service (a namespace, `auth0` for the session layer's accounts)
/// and the account's name within it.
///
/// A string literal is an account of the default service: `ItemKey(account: "me", kind: .generic)`.
/// The service and name are identifiers: they are stored only inside sealed blobs, and an
/// `AccountID` prints as `AccountID(…)` so that a stray log line never shows them; read
/// ``name`` and ``service`` where a person must see them.
public struct AccountID: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The namespace of the account.
    public var service: String
    /// The account's name within its service.
    public var name: String

    /// The service of an account that names none: the session layer's accounts (whatever the
    /// server) and storage-only items alike. Its value is part of every stored item's keyed
    /// lookup, so it stays `"auth0"` (the name it had when the store served Auth0 sessions only);
    /// `tokenctl` shows it as `(default)`.
    public static let defaultService = "auth0"

    /// The account `name` of `service`.
    public init(_ name: String, service: String = AccountID.defaultService) {
        self.service = service
        self.name = name
    }

    /// The account named by the literal, of the default service.
    public init(stringLiteral name: String) {
        self.init(name)
    }

    /// `AccountID(…)`: never the names.
    public var description: String { "AccountID(…)" }

    /// The same names as `other`, byte for byte (`==` on `String` also equates canonically
    /// equivalent spellings, whose UTF-8, and so whose keyed hash, differs).
    func hasSameBytes(as other: AccountID) -> Bool {
        UTF8Bytes.equal(service, other.service) && UTF8Bytes.equal(name, other.name)
    }
}
