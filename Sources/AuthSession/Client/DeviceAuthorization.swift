import FoundationEssentials
import TokenStore

/// What a device sign-in (RFC 8628) shows the user: the code to type and where to type it.
///
/// The user code is not a secret: the user reads it on this machine and types it on another
/// device, and it is worth nothing without the device code, which never leaves the session.
/// It may be shown, printed and turned into a QR code (``verificationURIComplete`` holds it).
public struct DeviceAuthorization: Sendable, Equatable {
    /// The code the user enters at ``verificationURI`` (`user_code`), e.g. `WDJB-MJHT`.
    public let userCode: String
    /// Where the user goes on any device with a browser (`verification_uri`).
    public let verificationURI: URL
    /// The same page with the code filled in (`verification_uri_complete`), when the server
    /// gives one: for a QR code or a link.
    public let verificationURIComplete: URL?
    /// When the code expires (`expires_in` after the answer): the sign-in ends `timedOut` then.
    public let expiresAt: Date
    /// How long the session waits between two polls of the token endpoint (`interval`, 5 s
    /// when the server does not say); `slow_down` adds 5 s to it.
    public let interval: Duration
}

/// The device authorization endpoint's answer: what the user sees, and the device code.
struct DeviceAuthorizationResponse: Sendable {
    /// `device_code`: a credential, sent to the token endpoint only.
    let deviceCode: SecretBytes
    let authorization: DeviceAuthorization

    /// The longest `expires_in` believed (a day); longer is capped.
    static let maximumLifetime: Int64 = 86_400
    /// The longest `interval` believed (10 minutes); longer is capped.
    static let maximumInterval: Int64 = 600

    /// Parses the JSON answer.
    ///
    /// - Throws: ``AuthSessionError/Code/unexpectedResponse`` for a body that is not the RFC 8628
    ///   §3.2 object (no `device_code`, `user_code`, `verification_uri` or `expires_in`, or a
    ///   user code that is not short printable text); ``AuthSessionError/Code/insecureConfiguration``
    ///   for a verification URI that is neither https nor http to a loopback host.
    static func decode(_ body: Data, status: Int, receivedAt: Date) throws(AuthSessionError) -> DeviceAuthorizationResponse {
        guard let object = ResponseClassifier.jsonObject(body) else {
            throw AuthSessionError(
                .unexpectedResponse, "The device authorization answer is not a JSON object (\(body.count) bytes).",
                httpStatus: status)
        }
        func missing(_ name: String) -> AuthSessionError {
            AuthSessionError(.unexpectedResponse, "The device authorization answer has no usable \(name).", httpStatus: status)
        }
        guard let deviceCode = object["device_code"]?.string, !deviceCode.isEmpty, deviceCode.utf8.count <= 4096 else {
            throw missing("device_code")
        }
        guard let userCode = object["user_code"]?.string, (1...64).contains(userCode.utf8.count),
            userCode.utf8.allSatisfy({ (0x20...0x7E).contains($0) })
        else { throw missing("user_code") }
        // Google says `verification_url`.
        guard let text = object["verification_uri"]?.string ?? object["verification_url"]?.string else {
            throw missing("verification_uri")
        }
        let verification = try verificationURL(text, name: "verification_uri")
        var complete: URL?
        if let text = object["verification_uri_complete"]?.string {
            complete = try verificationURL(text, name: "verification_uri_complete")
        }
        guard let expiresIn = seconds(object["expires_in"]), expiresIn > 0 else { throw missing("expires_in") }
        let interval = seconds(object["interval"]).map { max(1, $0) } ?? 5
        return DeviceAuthorizationResponse(
            deviceCode: SecretBytes(utf8: deviceCode),
            authorization: DeviceAuthorization(
                userCode: userCode, verificationURI: verification, verificationURIComplete: complete,
                expiresAt: receivedAt.addingTimeInterval(TimeInterval(min(expiresIn, maximumLifetime))),
                interval: .seconds(min(interval, maximumInterval))))
    }

    /// A verification address the user is sent to: https, or http to a loopback host, as every
    /// endpoint of the server; no user name or password, no fragment (a query is allowed:
    /// `verification_uri_complete` carries the code in it).
    private static func verificationURL(_ text: String, name: String) throws(AuthSessionError) -> URL {
        guard text.utf8.count <= 2048, let url = URL(string: text),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else {
            throw AuthSessionError(.unexpectedResponse, "The device authorization answer's \(name) is not a URL.")
        }
        let scheme = components.scheme?.lowercased()
        let host = components.host ?? ""
        guard !host.isEmpty, components.user == nil, components.password == nil, components.fragment == nil,
            scheme == "https" || (scheme == "http" && AuthorizationServerConfiguration.isLoopback(host: host))
        else {
            throw AuthSessionError(
                .insecureConfiguration, "The device authorization answer's \(name) is not https (or http to a loopback host).")
        }
        return url
    }

    /// Whole seconds of a JSON number or a string of digits; `nil` otherwise.
    private static func seconds(_ value: JSONValue?) -> Int64? {
        if case .number(let double)? = value, double.isFinite, double >= 0, double < 1e12 { return Int64(double) }
        if let text = value?.string, !text.isEmpty, text.count <= 12, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
            return Int64(text)
        }
        return nil
    }
}
