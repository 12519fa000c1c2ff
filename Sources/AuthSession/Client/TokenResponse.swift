import FoundationEssentials
import TokenStore

/// A successful answer of the token endpoint (`POST /oauth/token`).
///
/// Tokens are ``TokenStore/SecretBytes``: they never print. ``grantedScopes`` is what the
/// server granted (its `scope` field), or the requested scopes when it did not say.
public struct TokenResponse: Sendable {
    /// The access token.
    public let accessToken: SecretBytes
    /// A new refresh token (rotation), or `nil` when the server sent none.
    public let refreshToken: SecretBytes?
    /// The OpenID Connect id token, when sent.
    public let idToken: SecretBytes?
    /// The token type, normally `Bearer`.
    public let tokenType: String
    /// The access token's lifetime as sent (`expires_in`), when sent.
    public let expiresIn: Duration?
    /// When the access token expires: the time the answer arrived plus ``expiresIn``.
    public let expiresAt: Date?
    /// The scopes granted: the `scope` field split on spaces, or the requested scopes when
    /// the server sent no `scope` (see ``scopeWasReturned``).
    public let grantedScopes: [String]
    /// Whether the server sent a `scope` field.
    public let scopeWasReturned: Bool
    /// The server endpoints the request went to: what a refresh token of this answer is bound to.
    package internal(set) var servedBy: ServerEndpoints?

    /// A token response.
    public init(
        accessToken: SecretBytes, refreshToken: SecretBytes?, idToken: SecretBytes?, tokenType: String,
        expiresIn: Duration?, expiresAt: Date?, grantedScopes: [String], scopeWasReturned: Bool
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.expiresAt = expiresAt
        self.grantedScopes = grantedScopes
        self.scopeWasReturned = scopeWasReturned
    }

    /// The requested scopes this answer did not grant (see
    /// ``declinedScopes(requested:granted:refreshTokenReturned:)``).
    public func declinedScopes(requested: [String]) -> [String] {
        Self.declinedScopes(requested: requested, granted: grantedScopes, refreshTokenReturned: refreshToken != nil)
    }

    /// `requested − granted`, in the requested order, without duplicates; order and case of
    /// the server's list do not matter. `offline_access` counts as granted when a refresh
    /// token came back (Auth0 does not always echo it).
    ///
    /// ```swift
    /// TokenResponse.declinedScopes(requested: ["openid", "read:mail"], granted: ["openid"],
    ///                              refreshTokenReturned: true)   // ["read:mail"]
    /// ```
    public static func declinedScopes(requested: [String], granted: [String], refreshTokenReturned: Bool) -> [String] {
        var grantedSet = Set(granted)
        if refreshTokenReturned { grantedSet.insert("offline_access") }
        var seen = Set<String>()
        var declined: [String] = []
        for scope in requested where !scope.isEmpty && !grantedSet.contains(scope) && seen.insert(scope).inserted {
            declined.append(scope)
        }
        return declined
    }

    /// Splits a space-delimited `scope` value.
    static func scopes(from value: String) -> [String] {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }
}
