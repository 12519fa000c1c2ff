import FoundationEssentials

/// The claims of a validated ID token that an app needs.
///
/// Holds identifiers and personal data: `description` shows none of them.
struct IDTokenClaims: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `sub`: the Auth0 user id, such as `apple|000792.d71059495fa24644b94e4a644e2e3b4a.0638`.
    let subject: String
    /// `name`, when the token has it (scope `profile`).
    let name: String?
    /// `email`, when the token has it (scope `email`).
    let email: String?
    /// `email_verified` (a boolean, or the string `"true"`/`"false"` Apple sometimes sends).
    let emailVerified: Bool?
    /// `iat`.
    let issuedAt: Date
    /// `exp`.
    let expiresAt: Date
    /// `auth_time`, when present.
    let authenticatedAt: Date?

    /// The Apple user identifier: `sub` after its `apple|` prefix, or `nil` when `sub` names
    /// another identity (a linked primary account, another connection).
    var appleUserID: String? {
        let prefix = "apple|"
        guard subject.hasPrefix(prefix), subject.count > prefix.count else { return nil }
        return String(subject.dropFirst(prefix.count))
    }

    /// Shows which claims are present, never their values.
    var description: String {
        "IDTokenClaims(subject: [redacted], apple: \(appleUserID == nil ? "no" : "yes"), "
            + "name: \(name == nil ? "absent" : "[redacted]"), email: \(email == nil ? "absent" : "[redacted]"), "
            + "emailVerified: \(emailVerified.map(String.init) ?? "absent"))"
    }

    var debugDescription: String { description }
}
