@testable import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// DPoP on the token requests of ``AuthorizationServerClient`` (RFC 9449, issue 27 item 3)
/// against the real test server, which requires a nonce and binds refresh tokens to the key.
@Suite("DPoP token requests: nonce retry once, bound refresh tokens", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPClientTests {
    static let scopes = ["openid", "offline_access"]

    static func boundClient(_ server: AuthorizationServer, key: DPoPKey? = nil) throws -> AuthorizationServerClient {
        try AuthorizationServerClientTests.client(server).withDPoP(DPoPBinding(key: key ?? DPoPKey.generate()))
    }

    @Test("sign-in: one use_dpop_nonce answered by one retry with its nonce; DPoP tokens; the refresh reuses the nonce")
    func nonceDanceAndDPoPTokens() async throws {
        try await AuthorizationServerClientTests.withServer { server in
            let client = try Self.boundClient(server)
            let code = try server.appleAuthorizationCode(for: "apple-dpop-001")
            let signIn = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: Self.scopes)
            #expect(signIn.tokenType == "DPoP")
            #expect(try server.counter("dpop_nonce_challenges") == 1, "the first proof had no nonce: one 400, one retry")
            #expect(try server.counter("dpop_proofs") == 1)
            #expect(try server.counter("exchange_grants") == 1)
            let refreshed = try await client.refresh(#require(signIn.refreshToken), scopes: Self.scopes)
            #expect(refreshed.tokenType == "DPoP")
            #expect(try server.counter("dpop_nonce_challenges") == 1, "the nonce the server gave is sent: no 400 first")
            #expect(try server.counter("refresh_grants") == 1)
            // the nonce rotated mid-flow: one more 400 and one retry, the refresh succeeds
            try server.dpop(["rotate_nonce": true])
            let again = try await client.refresh(#require(refreshed.refreshToken), scopes: Self.scopes)
            #expect(again.tokenType == "DPoP")
            #expect(try server.counter("dpop_nonce_challenges") == 2)
            #expect(try server.counter("refresh_grants") == 2, "one renewal, one refresh grant")
        }
    }

    @Test("a second use_dpop_nonce in a row is an error; nothing consumed: the same refresh token works next")
    func secondNonceAnswerInARow() async throws {
        try await AuthorizationServerClientTests.withServer { server in
            let client = try Self.boundClient(server)
            let code = try server.appleAuthorizationCode(for: "apple-dpop-002")
            let signIn = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: Self.scopes)
            let refreshToken = try #require(signIn.refreshToken)
            try server.dpop(["reject_next": 2])
            let twice = await #expect(throws: AuthSessionError.self) { try await client.refresh(refreshToken, scopes: Self.scopes) }
            #expect(twice?.code == .invalidRequest && twice?.message.contains("use_dpop_nonce") == true)
            #expect(try server.counter("dpop_nonce_challenges") == 3, "the sign-in's one, then two in a row; no third try")
            #expect(try server.counter("refresh_grants") == 0)
            let later = try await client.refresh(refreshToken, scopes: Self.scopes)
            #expect(later.tokenType == "DPoP")
            #expect(try server.introspect(AuthorizationServerClientTests.string(refreshToken)).active == false, "rotated by the later refresh, not before")
        }
    }

    @Test("the refresh token stays bound: another key, or no DPoP, is refused by the server and the family stays")
    func stolenRefreshTokenElsewhere() async throws {
        try await AuthorizationServerClientTests.withServer { server in
            let client = try Self.boundClient(server)
            let code = try server.appleAuthorizationCode(for: "apple-dpop-003")
            let signIn = try await client.exchangeAppleAuthorizationCode(SecretBytes(utf8: code), scopes: Self.scopes)
            let refreshToken = try #require(signIn.refreshToken)
            let thief = try Self.boundClient(server)
            // the server's invalid_grant on a refresh is interactionRequired (sign in again)
            let stolen = await #expect(throws: AuthSessionError.self) { try await thief.refresh(refreshToken, scopes: Self.scopes) }
            #expect(stolen?.code == .interactionRequired)
            let bearer = try AuthorizationServerClientTests.client(server)
            let unproved = await #expect(throws: AuthSessionError.self) { try await bearer.refresh(refreshToken, scopes: Self.scopes) }
            #expect(unproved?.code == .interactionRequired)
            #expect(try server.counter("dpop_key_mismatches") == 2)
            #expect(try server.introspect(AuthorizationServerClientTests.string(refreshToken)).active, "the holder's token is untouched")
            #expect(try await client.refresh(refreshToken, scopes: Self.scopes).tokenType == "DPoP")
        }
    }
}
