import AuthSession
import CTokenStore
import FoundationEssentials
import TokenStore

// Logout that ends the browser session at the provider (include/tokenstore.h):
// ts_logout_options_init, ts_session_logout_browser.

@c @implementation
public func ts_logout_options_init(_ options: UnsafeMutablePointer<ts_logout_options>!) {
    guard let options else { return }
    options.pointee = ts_logout_options()
    options.pointee.struct_size = MemoryLayout<ts_logout_options>.size
}

@c @implementation
public func ts_session_logout_browser(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ optionsOrNull: UnsafePointer<ts_logout_options>!,
    _ cancelOrNull: OpaquePointer!, _ out: UnsafeMutablePointer<ts_logout_outcome>!,
    _ browserOut: UnsafeMutablePointer<ts_browser_session>!, _ browserErrorOrNull: UnsafeMutablePointer<OpaquePointer?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        browserErrorOrNull?.pointee = nil
        let out = try CInput.out(out, "outcome")
        let browserOut = try CInput.out(browserOut, "browser session outcome")
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let options = try LogoutOptions(optionsOrNull)
        let session = handle.session
        // The app's opener runs on this thread (see Blocking.wait(serving:open:_:)).
        let requests = options.openURL == nil ? nil : CallerThreadRequests()
        let browser: any BrowserOpener = requests.map { CallerThreadOpener(requests: $0) } ?? SystemBrowserOpener()
        let (redirectURIs, timeout) = (options.redirectURIs, options.timeout)
        let cancel = try CancelHandle.lookUp(cancelOrNull)
        let result = try Blocking.wait(serving: requests, open: options.open, cancel: cancel) {
            try await session.logout(
                account: account, endBrowserSession: true, redirectURIs: redirectURIs, timeout: timeout, browser: browser)
        }
        out.pointee = LogoutOptions.outcome(result.logout)
        switch result.browserSession {
        case .notAsked: browserOut.pointee = TS_BROWSER_SESSION_NOT_ASKED
        case .ended: browserOut.pointee = TS_BROWSER_SESSION_ENDED
        case .browserSessionNotEnded: browserOut.pointee = TS_BROWSER_SESSION_NOT_ENDED
        case .failed(let code):
            browserOut.pointee = TS_BROWSER_SESSION_FAILED
            if let browserErrorOrNull {
                let box = ErrorBox(code: code.rawValue, message: LogoutOptions.failureText(code))
                browserErrorOrNull.pointee = OpaquePointer(Unmanaged.passRetained(box).toOpaque())
            }
        }
        return CCall.ok
    }
}

/// A `ts_logout_options` read and checked, defaults filled in (as ``SignInOptions``).
struct LogoutOptions {
    static let defaultTimeoutSeconds: CInt = 120

    var redirectURIs: [URL]
    var timeout = Duration.seconds(Int(defaultTimeoutSeconds))
    var openURL: ts_open_url_fn?
    var userData: UnsafeMutableRawPointer?

    /// The `struct_size`s taken: 0.4.0's, the first.
    static let knownSizes = [MemoryLayout<ts_logout_options>.size]

    init(_ pointer: UnsafePointer<ts_logout_options>?) throws {
        guard let pointer else {
            redirectURIs = try SignInOptions.redirectURIs(ports: SignInOptions.defaultPorts, path: "/callback")
            return
        }
        let options = try CInput.versionedOptions(
            pointer, empty: ts_logout_options(), knownSizes: Self.knownSizes, typeName: "ts_logout_options")
        redirectURIs = try SignInOptions.redirectURIs(ports: options.ports, count: options.port_count, path: options.redirect_path)
        guard options.timeout_seconds >= 0, options.timeout_seconds <= SignInOptions.maxTimeoutSeconds else {
            throw CInput.invalid("The time-out is not 0 to \(SignInOptions.maxTimeoutSeconds) seconds.")
        }
        timeout = .seconds(Int(options.timeout_seconds == 0 ? Self.defaultTimeoutSeconds : options.timeout_seconds))
        openURL = options.open_url
        userData = options.user_data
    }

    /// Calls the app's `open_url` (on the calling thread); true when it returned 0.
    func open(_ url: String) -> Bool {
        guard let openURL else { return false }
        return url.withCString { openURL($0, userData) } == 0
    }

    static func outcome(_ outcome: LogoutOutcome) -> ts_logout_outcome {
        switch outcome {
        case .revoked: return TS_LOGOUT_REVOKED
        case .notFound: return TS_LOGOUT_NOT_FOUND
        case .revocationPending: return TS_LOGOUT_PENDING
        case .revocationFailed: return TS_LOGOUT_FAILED
        case .notRevocable: return TS_LOGOUT_NOT_REVOCABLE
        }
    }

    /// The message of the browser part's `ts_error` (its code is the field beside it).
    static func failureText(_ code: AuthSessionError.Code) -> String {
        let why: String
        switch code {
        case .browserUnavailable: why = "no browser could be started (or open_url returned non-zero)"
        case .loopbackUnavailable: why = "every loopback port for the browser's return is in use"
        case .timedOut: why = "the browser did not come back in time"
        case .cancelled: why = "the call was cancelled"
        default: why = "the provider's end-session step did not complete"
        }
        return "The user's browser session at the provider was not ended: \(why). The logout itself stands."
    }
}
