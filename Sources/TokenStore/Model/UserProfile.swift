import FoundationEssentials

/// Who an account's user is, as the ID tokens of its sign-ins said: kept sealed in the store
/// (``ItemKind/profile``) so that a name Apple sends on the first sign-in only is not lost.
///
/// Holds identifiers and personal data: `description` shows which fields are present, never
/// their values.
public struct UserProfile: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The Apple user identifier (the ID token's `sub` after `apple|`), when the account has one.
    public var userID: String?
    /// The ID token's `sub` (such as `apple|000792.d7105….0638`; another identity's id when
    /// accounts are linked).
    public var subject: String
    /// `name`, from the first sign-in that carried it.
    public var name: String?
    /// `email` (for Apple, often a private relay address).
    public var email: String?
    /// `email_verified`, when the token had it.
    public var emailVerified: Bool?

    public init(userID: String?, subject: String, name: String? = nil, email: String? = nil, emailVerified: Bool? = nil) {
        self.userID = userID
        self.subject = subject
        self.name = name
        self.email = email
        self.emailVerified = emailVerified
    }

    /// This profile with the name and email of `older` where this one has none: a later
    /// sign-in's ID token no longer carries what Apple sent once.
    func filling(from older: UserProfile) -> UserProfile {
        var merged = self
        if merged.name == nil { merged.name = older.name }
        if merged.email == nil {
            merged.email = older.email
            merged.emailVerified = older.emailVerified
        }
        return merged
    }

    public var description: String {
        "UserProfile(userID: \(userID == nil ? "absent" : "[redacted]"), subject: [redacted], "
            + "name: \(name == nil ? "absent" : "[redacted]"), email: \(email == nil ? "absent" : "[redacted]"))"
    }

    public var debugDescription: String { description }

    // MARK: Sealed form

    /// The fields kept in the `profile` item (the user id has an item of its own).
    private struct Stored: Codable {
        var sub: String
        var name: String?
        var email: String?
        var emailVerified: Bool?
    }

    /// The JSON sealed in the `profile` item.
    var sealedForm: SecretBytes {
        let stored = Stored(sub: subject, name: name, email: email, emailVerified: emailVerified)
        // Encoding strings and booleans cannot fail.
        var data = (try? JSONEncoder().encode(stored)) ?? Data()
        defer { data.resetBytes(in: 0..<data.count) }
        return SecretBytes(Array(data))
    }

    /// The profile kept in `secret`, or `nil` when it does not decode.
    init?(sealedForm secret: SecretBytes, userID: String?) {
        guard let stored = secret.withUnsafeBytes({ try? JSONDecoder().decode(Stored.self, from: Data($0)) }) else {
            return nil
        }
        self.init(userID: userID, subject: stored.sub, name: stored.name, email: stored.email, emailVerified: stored.emailVerified)
    }
}
