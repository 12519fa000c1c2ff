import FoundationEssentials

/// The credential state of an Apple user id, as Apple's `getCredentialState(forUserID:)`.
public enum CredentialState: String, Sendable, CaseIterable {
    /// A refresh token is stored for the user.
    case authorized
    /// The user logged out here, or revoked the app at Apple.
    case revoked
    /// The user was never seen by this store.
    case notFound
}

/// Why a credential state changed: a short code, never an identifier.
///
/// Codes are 1–64 characters of `[A-Za-z0-9._-]`; anything else is `invalidInput`.
public struct CredentialStateReason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A sign-in stored a refresh token.
    public static let signIn = Self(rawValue: "signIn")
    /// The user logged out in the app.
    public static let userLogout = Self(rawValue: "userLogout")
    /// Apple told the app that the user revoked it (consent revoked or account deleted).
    public static let appleRevoked = Self(rawValue: "appleRevoked")
    /// The authorization server refused the refresh token (`invalid_grant`).
    public static let refreshRejected = Self(rawValue: "refreshRejected")
    /// A pending remote revocation went through later.
    public static let revocationConfirmed = Self(rawValue: "revocationConfirmed")
    /// The app gave up on a pending revocation explicitly.
    public static let revocationDiscarded = Self(rawValue: "revocationDiscarded")
    /// A new sign-in on the same account replaced this user's session.
    public static let replacedBySignIn = Self(rawValue: "replacedBySignIn")
    /// The data key was lost and the store was reset.
    public static let keyLost = Self(rawValue: "keyLost")
    /// The app removed the account's local entries without revoking its refresh token.
    public static let clearedLocally = Self(rawValue: "clearedLocally")
    /// A logout at a server that cannot revoke (no revocation endpoint) deleted the refresh
    /// token locally; it stays valid at the server until it expires.
    public static let notRevocable = Self(rawValue: "notRevocable")

    public var description: String { rawValue }

    static func validate(_ code: String, what: String) throws {
        guard code.isPlainName, code.utf8.count <= 64 else {
            throw TokenStoreError(.invalidInput, "A \(what) must be 1–64 characters of [A-Za-z0-9._-].")
        }
    }
}

/// One recorded change of credential state.
public struct CredentialStateTransition: Sendable, Equatable {
    public let date: Date
    public let from: CredentialState
    public let to: CredentialState
    public let reason: CredentialStateReason
    /// An optional second code, such as `remoteRevocationPending`.
    public let detail: String?
}

/// Detail codes the session layer records with a transition.
public enum CredentialStateDetail {
    /// Logged out here; the refresh token is still queued for revocation at the server.
    public static let remoteRevocationPending = "remoteRevocationPending"
    /// Removed here without revoking: the refresh token may stay valid at the server until it expires.
    public static let notRevokedAtServer = "notRevokedAtServer"
    /// Logged out here; the server refused the revocation with a configuration error.
    public static let remoteRevocationFailed = "remoteRevocationFailed"
    /// One account of the user signed out (the transition's reason says how), while another
    /// account of the same user still holds a refresh token: the user stays `authorized`.
    public static let otherAccountSignedIn = "otherAccountSignedIn"
}

extension String {
    /// True for a non-empty name of `[A-Za-z0-9._-]` only: safe as a code, a file name part, a log value.
    var isPlainName: Bool {
        !isEmpty && utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a)
                || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d
        }
    }
}
