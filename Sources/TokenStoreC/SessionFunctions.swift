import AuthSession
import CTokenStore
import FoundationEssentials
import TokenStore

// Sessions: access tokens, logout and the revocation outbox (include/tokenstore.h).

@c @implementation
public func ts_session_new(
    _ store: OpaquePointer!, _ domain: UnsafePointer<CChar>!, _ clientID: UnsafePointer<CChar>!,
    _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    newSession(store, out, err) {
        try AuthorizationServerConfiguration(
            domain: CInput.string(domain, "domain"), clientID: CInput.string(clientID, "client id"))
    }
}

@c @implementation
public func ts_session_new_issuer(
    _ store: OpaquePointer!, _ issuer: UnsafePointer<CChar>!, _ clientID: UnsafePointer<CChar>!,
    _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    newSession(store, out, err) {
        try AuthorizationServerConfiguration(
            issuer: CInput.string(issuer, "issuer"), clientID: CInput.string(clientID, "client id"))
    }
}

/// The body of both session constructors: a session over the store's handle with the
/// configuration `configure` makes, handed out as a new session handle.
private func newSession(
    _ store: OpaquePointer!, _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!,
    _ configure: () throws -> AuthorizationServerConfiguration
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(out, "session")
        out.pointee = nil
        let storeHandle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(storeHandle) {} }  // alive until the call ends, however it is closed meanwhile
        let session = TokenSession(store: storeHandle.store, configuration: try configure())
        out.pointee = sessionHandles.insert(SessionHandle(session, storeHandle: storeHandle))
        return CCall.ok
    }
}

@c @implementation
public func ts_session_free(_ session: OpaquePointer!) {
    sessionHandles.remove(session)
}

@c @implementation
public func ts_session_access_token(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ audienceOrNull: UnsafePointer<CChar>!,
    _ scopesSpaceSeparated: UnsafePointer<CChar>!, _ minTTLSeconds: CInt,
    _ token: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>!, _ length: UnsafeMutablePointer<Int>!,
    _ expiresAt: UnsafeMutablePointer<Int64>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionAccessToken(session, account, audienceOrNull, scopesSpaceSeparated, minTTLSeconds, nil, token, length, expiresAt, err)
}

/// ts_session_access_token and its `_cancellable` form (`cancelOrNull` NULL: not cancellable).
func sessionAccessToken(
    _ session: OpaquePointer?, _ account: UnsafePointer<CChar>?, _ audienceOrNull: UnsafePointer<CChar>?,
    _ scopesSpaceSeparated: UnsafePointer<CChar>?, _ minTTLSeconds: CInt, _ cancelOrNull: OpaquePointer?,
    _ token: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?, _ length: UnsafeMutablePointer<Int>?,
    _ expiresAt: UnsafeMutablePointer<Int64>?, _ err: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    CCall.run(err) {
        let tokenOut = try CInput.out(token, "token")
        let lengthOut = try CInput.out(length, "length")
        tokenOut.pointee = nil
        lengthOut.pointee = 0
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let audience = try CInput.optionalString(audienceOrNull, "audience")
        let scopes = try CInput.optionalString(scopesSpaceSeparated, "scopes")?
            .split(separator: " ", omittingEmptySubsequences: true).map(String.init) ?? []
        guard minTTLSeconds >= 0 else { throw CInput.invalid("The minimum TTL is negative.") }
        let minimumTTL = Duration.seconds(Int(minTTLSeconds))
        let session = handle.session
        let cancel = try CancelHandle.lookUp(cancelOrNull)
        let accessToken = try Blocking.wait(cancel: cancel) {
            try await session.accessToken(for: account, audience: audience, scopes: scopes, minimumTTL: minimumTTL)
        }
        SecretBuffer.hand(accessToken.token, to: tokenOut, length: lengthOut)
        if let expiresAt {
            // The store keeps dates within years 1-9999; `exactly:` keeps a trap out of reach anyway.
            expiresAt.pointee = accessToken.expiresAt.flatMap { Int64(exactly: $0.timeIntervalSince1970.rounded(.down)) } ?? 0
        }
        return CCall.ok
    }
}

@c @implementation
public func ts_session_logout(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ out: UnsafeMutablePointer<ts_logout_outcome>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionLogout(session, account, nil, out, err)
}

/// ts_session_logout and its `_cancellable` form.
func sessionLogout(
    _ session: OpaquePointer?, _ account: UnsafePointer<CChar>?, _ cancelOrNull: OpaquePointer?,
    _ out: UnsafeMutablePointer<ts_logout_outcome>?, _ err: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(out, "outcome")
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let session = handle.session
        let cancel = try CancelHandle.lookUp(cancelOrNull)
        switch try Blocking.wait(cancel: cancel, { try await session.logout(account: account) }) {
        case .revoked: out.pointee = TS_LOGOUT_REVOKED
        case .notFound: out.pointee = TS_LOGOUT_NOT_FOUND
        case .revocationPending: out.pointee = TS_LOGOUT_PENDING
        case .revocationFailed: out.pointee = TS_LOGOUT_FAILED
        case .notRevocable: out.pointee = TS_LOGOUT_NOT_REVOCABLE
        }
        return CCall.ok
    }
}

@c @implementation
public func ts_session_resume(
    _ session: OpaquePointer!, _ stillPending: UnsafeMutablePointer<CInt>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionResume(session, nil, stillPending, err)
}

/// ts_session_resume and its `_cancellable` form.
func sessionResume(
    _ session: OpaquePointer?, _ cancelOrNull: OpaquePointer?, _ stillPending: UnsafeMutablePointer<CInt>?,
    _ err: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    CCall.run(err) {
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let session = handle.session
        let cancel = try CancelHandle.lookUp(cancelOrNull)
        let report = try Blocking.wait(cancel: cancel) { try await session.resumePendingRevocations() }
        stillPending?.pointee = CInt(clamping: report.stillPending)
        return CCall.ok
    }
}

@c @implementation
public func ts_session_is_dpop_bound(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ bound: UnsafeMutablePointer<CInt>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let boundOut = try CInput.out(bound, "bound")
        boundOut.pointee = 0
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let session = handle.session
        boundOut.pointee = try Blocking.wait { try await session.isDPoPBound(account: account) } ? 1 : 0
        return CCall.ok
    }
}

@c @implementation
public func ts_session_dpop_proof(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ method: UnsafePointer<CChar>!,
    _ url: UnsafePointer<CChar>!, _ proof: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let proofOut = try CInput.out(proof, "proof")
        proofOut.pointee = nil
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let method = try CInput.string(method, "method")
        guard let url = URL(string: try CInput.string(url, "url")) else { throw CInput.invalid("The URL is not a URL.") }
        let session = handle.session
        let made = try Blocking.wait { () async throws -> String in
            guard try await session.isDPoPBound(account: account) else {
                throw AuthSessionError(.invalidRequest, "The account's session is not DPoP-bound.")
            }
            let token = try await session.accessToken(for: account)
            return try await session.dpopProof(method: method, url: url, accessToken: token)
        }
        proofOut.pointee = try CStrings.mallocCopy(made)
        return CCall.ok
    }
}

@c @implementation
public func ts_session_record_dpop_nonce(
    _ session: OpaquePointer!, _ url: UnsafePointer<CChar>!, _ nonce: UnsafePointer<CChar>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        guard let url = URL(string: try CInput.string(url, "url")) else { throw CInput.invalid("The URL is not a URL.") }
        let nonce = try CInput.string(nonce, "nonce")
        let session = handle.session
        try Blocking.wait { try await session.recordDPoPNonce(nonce, for: url) }
        return CCall.ok
    }
}
