import FoundationEssentials

/// One HTTP request as handed to an ``HTTPTransport``.
///
/// The body may carry a token: `description` shows only its length, never its content.
public struct HTTPRequest: Sendable, CustomStringConvertible {
    /// The request method, such as `POST`.
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// The header fields.
    public var headers: HTTPHeaders
    /// The body, or `nil`. May hold a secret: never log it.
    public var body: Data?
    /// How long the whole exchange (connect, send, receive the full answer) may take.
    public var timeout: Duration

    /// A request.
    public init(
        method: String, url: URL, headers: HTTPHeaders = HTTPHeaders(), body: Data? = nil,
        timeout: Duration = .seconds(30)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// `POST https://host/path (body 123 bytes)` — the body itself is never shown.
    public var description: String {
        "\(method) \(url.absoluteString) (body \(body?.count ?? 0) bytes)"
    }
}
