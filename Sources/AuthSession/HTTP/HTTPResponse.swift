import FoundationEssentials

/// One HTTP answer as delivered by an ``HTTPTransport``. Redirects are delivered as
/// answers (status 3xx), never followed.
///
/// The body may carry a token: `description` shows only its length.
public struct HTTPResponse: Sendable, CustomStringConvertible {
    /// The status code, such as 200.
    public var status: Int
    /// The header fields (case-insensitive names).
    public var headers: HTTPHeaders
    /// The body bytes. May hold a secret: never log it.
    public var body: Data

    /// An answer.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `HTTP 200 (body 123 bytes)` — the body itself is never shown.
    public var description: String { "HTTP \(status) (body \(body.count) bytes)" }
}
