import AuthSession
import CTokenStore
import FoundationEssentials
import Glibc
import TokenStore

// Device sign-in (include/tokenstore.h): ts_session_sign_in_device.

@c @implementation
public func ts_session_sign_in_device(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ scopesOrNull: UnsafePointer<CChar>!,
    _ audienceOrNull: UnsafePointer<CChar>!, _ dpop: CInt, _ onUserCode: ts_user_code_fn!,
    _ userData: UnsafeMutableRawPointer!, _ userIDOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        userIDOrNull?.pointee = nil
        guard let onUserCode else { throw CInput.invalid("The user-code callback is NULL.") }
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let scopes = try CInput.optionalString(scopesOrNull, "scopes").map {
            $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        } ?? ["openid", "profile", "email"]
        let audience = try CInput.optionalString(audienceOrNull, "audience")
        let usesDPoP: Bool? = dpop != 0 ? true : nil
        let session = handle.session
        // The callback runs on this thread (Blocking.wait(serving:open:_:)): the code is kept
        // here and the blocked C thread is woken to show it.
        let shown = Locked<DeviceAuthorization?>(nil)
        let requests = CallerThreadRequests()
        let result = try Blocking.wait(
            serving: requests,
            open: { _ in
                guard let code = shown.withLock({ $0 }) else { return false }
                let seconds = max(0, min(Int(CInt.max), Int(code.expiresAt.timeIntervalSinceNow.rounded())))
                code.userCode.withCString { userCode in
                    code.verificationURI.absoluteString.withCString { uri in
                        if let complete = code.verificationURIComplete?.absoluteString {
                            complete.withCString { onUserCode(userCode, uri, $0, CInt(seconds), userData) }
                        } else {
                            onUserCode(userCode, uri, nil, CInt(seconds), userData)
                        }
                    }
                }
                return true
            }
        ) {
            try await session.signInWithDevice(
                account: account, scopes: scopes, audience: audience, usesDPoP: usesDPoP,
                onUserCode: { code in
                    shown.withLock { $0 = code }
                    // Shown by the C thread while the sign-in waits its first interval.
                    Task { _ = await requests.open("user-code") }
                })
        }
        if let userIDOrNull, let userID = result.profile.userID {
            userIDOrNull.pointee = try CStrings.mallocCopy(userID)
        }
        return CCall.ok
    }
}
