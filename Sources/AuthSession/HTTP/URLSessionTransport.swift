import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``HTTPTransport`` over `URLSession` (FoundationNetworking on Linux).
///
/// - Never follows a redirect: a 3xx answer is delivered as is (a redirected POST carrying
///   a token must not go anywhere else).
/// - Uses an ephemeral session: no cookies, no cache, no stored credentials.
/// - Enforces ``HTTPRequest/timeout`` over the whole exchange, so a server trickling its
///   body slowly still times out.
/// - Maps `URLError` into ``TransportFailure`` (original error attached).
///
/// ```swift
/// let client = try AuthorizationServerClient(
///     configuration: configuration, transport: URLSessionTransport())
/// ```
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// A transport with its own ephemeral session.
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCredentialStorage = nil
        session = URLSession(
            configuration: configuration, delegate: RedirectRefusingDelegate(), delegateQueue: nil)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// Sends `request` once; the answer is returned whatever its status (3xx included).
    /// - Throws: ``TransportFailure``.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let timeoutSeconds = Self.seconds(request.timeout)
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        // FoundationNetworking rounds this down to whole seconds and treats it as a backstop;
        // the deadline below is the real bound.
        urlRequest.timeoutInterval = max(1, timeoutSeconds.rounded(.up) + 1)
        urlRequest.httpShouldHandleCookies = false
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        urlRequest.httpBody = request.body

        let exchange = Exchange()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    exchange.complete(data: data, response: response, error: error)
                }
                exchange.start(task: task, continuation: continuation, timeout: timeoutSeconds)
            }
        } onCancel: {
            exchange.cancel()
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return max(0, Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Maps a URL-loading error into a ``TransportFailure``.
    static func failure(for error: any Error, timedOut: Bool, cancelled: Bool) -> TransportFailure {
        if timedOut {
            return TransportFailure(.timedOut, "No complete answer within the request timeout.", underlying: error)
        }
        if let urlError = error as? URLError {
            return failure(for: urlError, cancelledByCaller: cancelled)
        }
        let nsError = error as NSError
        if nsError.domain == NSURLErrorDomain {
            return failure(for: URLError(URLError.Code(rawValue: nsError.code) ?? .unknown), cancelledByCaller: cancelled)
        }
        if cancelled { return TransportFailure(.cancelled, "The request was cancelled.", underlying: nil) }
        return TransportFailure(.other, "\(nsError.domain) error \(nsError.code)", underlying: nil)
    }

    static func failure(for error: URLError, cancelledByCaller: Bool) -> TransportFailure {
        let code = error.code
        let text = "URLError \(code.rawValue)"
        switch code {
        case .notConnectedToInternet, .cannotConnectToHost, .cannotFindHost, .networkConnectionLost,
            .dnsLookupFailed, .internationalRoamingOff, .dataNotAllowed, .callIsActive,
            .resourceUnavailable, .badServerResponse, .zeroByteResource, .cannotParseResponse:
            // badServerResponse / zeroByteResource / cannotParseResponse: libcurl's "empty reply
            // from server" and friends — the connection was dropped before an answer.
            return TransportFailure(.notConnected, "\(text): host unreachable or connection lost.", underlying: error)
        case .timedOut:
            return TransportFailure(.timedOut, "\(text): timed out.", underlying: error)
        case .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted,
            .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid, .clientCertificateRejected,
            .clientCertificateRequired, .appTransportSecurityRequiresSecureConnection:
            return TransportFailure(.tls, "\(text): TLS handshake or certificate failure.", underlying: error)
        case .cancelled:
            return TransportFailure(.cancelled, "\(text): cancelled.", underlying: error)
        default:
            if cancelledByCaller { return TransportFailure(.cancelled, "\(text): cancelled.", underlying: error) }
            // FoundationNetworking reports some libcurl failures (a TLS handshake error among
            // them) as URLError.unknown with libcurl's text; that text names no secret.
            let detail = ((error as NSError).userInfo[NSLocalizedDescriptionKey] as? String ?? "").lowercased()
            if ["ssl", "tls", "certificate"].contains(where: detail.contains) {
                return TransportFailure(.tls, "\(text): TLS handshake or certificate failure.", underlying: error)
            }
            if ["connection refused", "connection reset", "couldn't connect", "could not resolve"].contains(where: detail.contains) {
                return TransportFailure(.notConnected, "\(text): host unreachable or connection lost.", underlying: error)
            }
            return TransportFailure(.other, "\(text).", underlying: error)
        }
    }
}

/// Refuses every redirect so the 3xx is delivered as the answer.
private final class RedirectRefusingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// The state of one exchange: resumes its continuation exactly once, whichever of the
/// answer, the deadline or a cancellation comes first.
// @unchecked Sendable: every mutable field is read and written under `lock`.
private final class Exchange: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var continuation: CheckedContinuation<HTTPResponse, any Error>?
    private var timer: DispatchWorkItem?
    private var cancelled = false
    private var timedOut = false
    private var finished = false

    func start(task: URLSessionDataTask, continuation: CheckedContinuation<HTTPResponse, any Error>, timeout: Double) {
        let alreadyCancelled: Bool = lock.withLock {
            self.task = task
            self.continuation = continuation
            return cancelled
        }
        if alreadyCancelled {
            finish(.failure(TransportFailure(.cancelled, "The request was cancelled before it started.")))
            return
        }
        let timer = DispatchWorkItem { [weak self] in self?.expire() }
        lock.withLock { self.timer = timer }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
        task.resume()
    }

    func cancel() {
        let task: URLSessionDataTask? = lock.withLock {
            cancelled = true
            return self.task
        }
        task?.cancel()
    }

    private func expire() {
        let task: URLSessionDataTask? = lock.withLock {
            guard !finished else { return nil }
            timedOut = true
            return self.task
        }
        task?.cancel()
    }

    func complete(data: Data?, response: URLResponse?, error: (any Error)?) {
        let (timedOut, cancelled) = lock.withLock { (self.timedOut, self.cancelled) }
        if let error {
            finish(.failure(URLSessionTransport.failure(for: error, timedOut: timedOut, cancelled: cancelled)))
            return
        }
        guard let http = response as? HTTPURLResponse else {
            finish(.failure(TransportFailure(.other, "The answer was not an HTTP response.")))
            return
        }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            headers.add(name: "\(name)", value: "\(value)")
        }
        finish(.success(HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data())))
    }

    private func finish(_ result: Result<HTTPResponse, TransportFailure>) {
        let (continuation, timer): (CheckedContinuation<HTTPResponse, any Error>?, DispatchWorkItem?) = lock.withLock {
            guard !finished else { return (nil, nil) }
            finished = true
            defer { self.continuation = nil; self.task = nil }
            return (self.continuation, self.timer)
        }
        timer?.cancel()
        switch result {
        case .success(let response): continuation?.resume(returning: response)
        case .failure(let failure): continuation?.resume(throwing: failure)
        }
    }
}
