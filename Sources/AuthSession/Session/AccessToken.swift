import Foundation
import TokenStore

/// An access token handed to the app, with its expiry and the scopes it was granted.
public struct AccessToken: Sendable, CustomStringConvertible {
    /// Where the token came from.
    public enum Source: String, Sendable {
        /// The store's sealed access-token cache (no network).
        case cache
        /// A refresh at the authorization server.
        case network
        /// The sign-in exchange.
        case signIn
    }

    /// The token. Convert with ``SecretBytes/stringValue()`` only to put it in a request header.
    public let token: SecretBytes
    public let expiresAt: Date
    public let scopes: [String]
    public let source: Source

    public var description: String {
        "AccessToken(\(token), expires \(expiresAt), scopes \(scopes.joined(separator: " ")), from \(source.rawValue))"
    }
}

/// The result of a sign-in.
public struct SignInResult: Sendable {
    /// The access token, also cached (sealed) in the store.
    public let accessToken: AccessToken
    /// The validated ID token, also kept (sealed) in the store.
    public let idToken: SecretBytes?
    /// Scopes asked for but not granted.
    public let declinedScopes: [String]
    /// Who signed in: the Apple user id, the ID token's `sub`, and the name and email the
    /// store keeps for the account (see ``TokenSession/userProfile(account:)``).
    public let profile: UserProfile
}

/// What a logout did.
public enum LogoutOutcome: Sendable, Equatable, CustomStringConvertible {
    /// Nothing was stored for the account; no network call was made.
    case notFound
    /// The refresh token was revoked at the server and the local entries deleted.
    case revoked
    /// Logged out here; the token is in the outbox, to be revoked when the server is reachable.
    case revocationPending
    /// Logged out here; the server refused the revocation for good (a configuration error).
    /// The token stays in the outbox, flagged, for the app to surface.
    case revocationFailed(AuthSessionError.Code)

    public var description: String {
        switch self {
        case .notFound: return "notFound"
        case .revoked: return "revoked"
        case .revocationPending: return "revocationPending"
        case .revocationFailed(let code): return "revocationFailed(\(code.rawValue))"
        }
    }
}

/// What ``LogoutCoordinator/resumePendingRevocations()`` did.
public struct RevocationReport: Sendable, Equatable, CustomStringConvertible {
    /// Entries revoked at the server and removed from the outbox.
    public var revoked = 0
    /// Entries that failed transiently again and stay queued.
    public var stillPending = 0
    /// Entries the server refused for good (flagged, kept).
    public var failed = 0
    /// Entries not yet due, left alone.
    public var notDue = 0

    public var description: String { "revoked=\(revoked) stillPending=\(stillPending) failed=\(failed) notDue=\(notDue)" }

    mutating func count(_ outcome: LogoutOutcome) {
        switch outcome {
        case .revoked, .notFound: revoked += 1
        case .revocationPending: stillPending += 1
        case .revocationFailed: failed += 1
        }
    }
}
