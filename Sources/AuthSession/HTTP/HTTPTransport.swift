/// Sends one HTTP request and returns the answer, whatever its status.
///
/// Implementations never follow redirects (a 3xx is returned as an answer), enforce
/// ``HTTPRequest/timeout`` over the whole exchange, honour task cancellation, and throw a
/// ``TransportFailure`` when no complete answer arrived.
///
/// ```swift
/// let transport: any HTTPTransport = CurlTransport()
/// let response = try await transport.send(HTTPRequest(method: "GET", url: url))
/// ```
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer.
    /// - Throws: ``TransportFailure`` when no complete answer arrived.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// A request that produced no complete answer, split the way an app must react to it.
///
/// The original system error stays attached in ``underlying`` (for ``CurlTransport``, the
/// libcurl code: its `description` reads `libcurl error 7 (Couldn't connect to server)`).
public struct TransportFailure: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: String, Sendable, CaseIterable {
        /// No network, host not found, connection refused, reset or lost.
        case notConnected
        /// The exchange did not complete within the request's timeout.
        case timedOut
        /// TLS handshake or certificate failure.
        case tls
        /// The request was cancelled.
        case cancelled
        /// Anything else (a malformed answer, an unsupported URL, …).
        case other
    }

    /// The kind of failure.
    public let kind: Kind
    /// A short description without secrets.
    public let message: String
    /// The original error, when there is one.
    public let underlying: (any Error)?

    /// A failure of `kind`.
    public init(_ kind: Kind, _ message: String, underlying: (any Error)? = nil) {
        self.kind = kind
        self.message = message
        self.underlying = underlying
    }

    /// `transport notConnected: message`.
    public var description: String { "transport \(kind.rawValue): \(message)" }
}
