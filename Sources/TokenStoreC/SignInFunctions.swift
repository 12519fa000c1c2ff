import AuthSession
import CTokenStore
import FoundationEssentials
import Glibc
import TokenStore

// Browser sign-in (include/tokenstore.h): ts_sign_in_options_init, ts_session_sign_in_browser,
// ts_string_free.

@c @implementation
public func ts_sign_in_options_init(_ options: UnsafeMutablePointer<ts_sign_in_options>!) {
    guard let options else { return }
    options.pointee = ts_sign_in_options()
    options.pointee.struct_size = MemoryLayout<ts_sign_in_options>.size
}

@c @implementation
public func ts_session_sign_in_browser(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ optionsOrNull: UnsafePointer<ts_sign_in_options>!,
    _ userIDOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionSignInBrowser(session, account, optionsOrNull, nil, userIDOrNull, err)
}

/// ts_session_sign_in_browser and its `_cancellable` form.
func sessionSignInBrowser(
    _ session: OpaquePointer?, _ account: UnsafePointer<CChar>?, _ optionsOrNull: UnsafePointer<ts_sign_in_options>?,
    _ cancelOrNull: OpaquePointer?, _ userIDOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ err: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    CCall.run(err) {
        userIDOrNull?.pointee = nil
        let handle = try sessionHandles.lookUp(session)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        let options = try SignInOptions(optionsOrNull)
        let session = handle.session
        // The app's opener runs on this thread (see Blocking.wait(serving:open:_:)).
        let requests = options.openURL == nil ? nil : CallerThreadRequests()
        let browser: any BrowserOpener = requests.map { CallerThreadOpener(requests: $0) } ?? SystemBrowserOpener()
        let (redirectURIs, connection, scopes, audience, timeout, usesDPoP) =
            (options.redirectURIs, options.connection, options.scopes, options.audience, options.timeout, options.usesDPoP)
        let (prompt, loginHint, maxAge, acrValues) = (options.prompt, options.loginHint, options.maxAge, options.acrValues)
        let cancel = try CancelHandle.lookUp(cancelOrNull)
        let result = try Blocking.wait(serving: requests, open: options.open, cancel: cancel) {
            try await session.signIn(
                account: account, redirectURIs: redirectURIs, connection: connection, scopes: scopes,
                audience: audience, prompt: prompt, loginHint: loginHint, maxAge: maxAge, acrValues: acrValues,
                timeout: timeout, browser: browser, usesDPoP: usesDPoP)
        }
        if let userIDOrNull, let userID = result.profile.userID {
            userIDOrNull.pointee = try CStrings.mallocCopy(userID)
        }
        return CCall.ok
    }
}

@c @implementation
public func ts_string_free(_ string: UnsafeMutablePointer<CChar>!) {
    // Strings are made by CStrings.mallocCopy: malloc'd and NUL-terminated. Wiped first (the
    // user id is an identifier); free() and g_free() still release them, without the wipe.
    guard let string else { return }
    explicit_bzero(string, strlen(string))
    free(string)
}

/// A `ts_sign_in_options` read and checked, defaults filled in.
struct SignInOptions {
    /// tokenctl login's ports (http://127.0.0.1:PORT/callback).
    static let defaultPorts: [UInt16] = [53180, 53181, 53182, 53183]
    static let maxPorts = 64
    static let defaultTimeoutSeconds: CInt = 300
    static let maxTimeoutSeconds: CInt = 86_400

    var redirectURIs: [URL]
    var connection: String? = "apple"
    var scopes = ["openid", "profile", "email"]
    var audience: String?
    var timeout = Duration.seconds(Int(defaultTimeoutSeconds))
    var openURL: ts_open_url_fn?
    var userData: UnsafeMutableRawPointer?
    /// `dpop` non-zero: true; nil: the session's configuration (Bearer for a C session).
    var usesDPoP: Bool?
    var prompt: SignInPrompt?
    /// An identifier: never in an error text.
    var loginHint: String?
    var maxAge: Duration?
    var acrValues: [String] = []

    /// The `struct_size`s taken: each header's `sizeof(ts_sign_in_options)`, oldest first (0.2.0
    /// to 0.3.0 ended at `user_data`; 0.4.0 added `dpop` to `max_age_seconds`, none of which was
    /// released alone). A caller's struct is copied only as far as its size; the fields after it
    /// keep their zero defaults.
    static let knownSizes = [MemoryLayout<ts_sign_in_options>.offset(of: \.dpop)!, MemoryLayout<ts_sign_in_options>.size]

    init(_ pointer: UnsafePointer<ts_sign_in_options>?) throws {
        guard let pointer else {
            redirectURIs = try Self.redirectURIs(ports: Self.defaultPorts, path: "/callback")
            return
        }
        let options = try CInput.versionedOptions(
            pointer, empty: ts_sign_in_options(), knownSizes: Self.knownSizes, typeName: "ts_sign_in_options")
        redirectURIs = try Self.redirectURIs(ports: options.ports, count: options.port_count, path: options.redirect_path)
        if let connection = try CInput.optionalString(options.connection, "connection") {
            self.connection = connection.isEmpty ? nil : connection
        }
        if let scopes = try CInput.optionalString(options.scopes, "scopes") {
            self.scopes = scopes.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        audience = try CInput.optionalString(options.audience, "audience")
        guard options.timeout_seconds >= 0, options.timeout_seconds <= Self.maxTimeoutSeconds else {
            throw CInput.invalid("The time-out is not 0 to \(Self.maxTimeoutSeconds) seconds.")
        }
        timeout = .seconds(Int(options.timeout_seconds == 0 ? Self.defaultTimeoutSeconds : options.timeout_seconds))
        openURL = options.open_url
        userData = options.user_data
        usesDPoP = options.dpop != 0 ? true : nil
        if let prompt = try CInput.optionalString(options.prompt, "prompt") {
            guard let value = SignInPrompt(rawValue: prompt) else {
                throw CInput.invalid("The prompt is not one of login, select_account, consent, none.")
            }
            self.prompt = value
        }
        // Not echoed in any error: the hint is an identifier.
        loginHint = try CInput.optionalString(options.login_hint, "login hint")
        if loginHint?.isEmpty == true { throw CInput.invalid("The login hint is empty (NULL sends none).") }
        if let acr = try CInput.optionalString(options.acr_values, "acr values") {
            acrValues = acr.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        if options.max_age_set != 0 {
            guard options.max_age_seconds >= 0 else { throw CInput.invalid("The max_age is negative.") }
            maxAge = .seconds(Int(options.max_age_seconds))
        }
    }

    /// The loopback redirect URIs of an options struct's `ports`/`port_count`/`redirect_path`,
    /// checked; no ports: ``defaultPorts``; no path: `/callback`.
    static func redirectURIs(ports: UnsafePointer<UInt16>?, count: Int, path: UnsafePointer<CChar>?) throws -> [URL] {
        // size_t arrives as Int: a count with the top bit set reads as negative.
        guard count >= 0, count <= maxPorts else { throw CInput.invalid("The port count is over \(maxPorts).") }
        guard count == 0 || ports != nil else { throw CInput.invalid("The ports are NULL with a non-zero count.") }
        let list = count == 0 ? defaultPorts : Array(UnsafeBufferPointer(start: ports, count: count))
        return try redirectURIs(ports: list, path: CInput.optionalString(path, "redirect path") ?? "/callback")
    }

    /// `http://127.0.0.1:PORT<path>` for each port. The sign-in checks each one is a loopback
    /// redirect (RFC 8252); a path that does not even make a URL is refused the same way.
    static func redirectURIs(ports: [UInt16], path: String) throws -> [URL] {
        try ports.map { port in
            guard let uri = URL(string: "http://127.0.0.1:\(port)\(path)") else {
                throw AuthSessionError(
                    .insecureConfiguration, "The redirect path does not make an http://127.0.0.1:PORT/path URI.")
            }
            return uri
        }
    }

    /// Calls the app's `open_url` (on the calling thread); true when it returned 0.
    func open(_ url: String) -> Bool {
        guard let openURL else { return false }
        return url.withCString { openURL($0, userData) } == 0
    }
}

/// The app's `open_url` as a ``BrowserOpener``: the URL goes to the thread blocked in
/// `ts_session_sign_in_browser`, which calls the C function.
struct CallerThreadOpener: BrowserOpener {
    let requests: CallerThreadRequests

    func open(_ url: URL) async throws {
        guard await requests.open(url.absoluteString) else {
            throw AuthSessionError(.browserUnavailable, "The app's open_url callback did not open a browser.")
        }
    }
}
