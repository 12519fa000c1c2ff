internal import CCurl
import FoundationEssentials
import TokenStore

/// The ``HTTPTransport`` of AuthSession: libcurl (Debian's OpenSSL build) called directly,
/// without FoundationNetworking.
///
/// Every request:
/// - **Never follows a redirect** (`CURLOPT_FOLLOWLOCATION` 0): a 3xx is delivered as the
///   answer, so a redirected POST carrying a token goes nowhere else.
/// - **Reads at most ``maximumBodyBytes``** of answer: a `Content-Length` above it is refused
///   from the header callback before any body byte is read, and the write callback stops the
///   transfer as soon as a body without a length passes it (``TransportFailure/Kind/other``,
///   "too large"). Header lines are bounded the same way.
/// - **Never uses a proxy for a loopback host** (`localhost`, `127.0.0.0/8`, `::1`, as libcurl's
///   own URL parser reads the host): `CURLOPT_PROXY ""` and `CURLOPT_NOPROXY "*"`, whatever
///   `http_proxy`/`ALL_PROXY` say, so a local "proxy" never sees a token sent in clear to a
///   loopback server. Other hosts use the environment's proxy (`https_proxy`, `HTTPS_PROXY`,
///   `all_proxy`, `ALL_PROXY`; `http_proxy` for `http`; `no_proxy`/`NO_PROXY` honoured) through
///   a `CONNECT` tunnel, with TLS to the server verified end to end.
/// - **TLS 1.2 or later, peer and host always verified** (also towards an `https://` proxy).
/// - **Speaks only `http` and `https`** (`CURLOPT_PROTOCOLS_STR`), no cookies, no `.netrc`,
///   no content decoding (the size limit counts the bytes on the wire: no decompression bomb).
/// - **Times out** after ``HTTPRequest/timeout`` for the whole exchange (connect included),
///   so a server trickling its body slowly still times out.
/// - **Stops at task cancellation** at once (the transfer loop is woken and the progress
///   callback aborts), with ``TransportFailure/Kind/cancelled``.
/// - Maps libcurl's errors into ``TransportFailure`` kinds, with the libcurl code attached
///   (its `description` reads `libcurl error 7 (Couldn't connect to server)`).
///
/// The blocking transfer runs on a thread of its own, never on the cooperative pool.
///
/// **Secrets.** The request body is sent from the caller's `Data` (not copied by us; a form made
/// by AuthSession wipes itself when released), and the answer is collected in memory we own that
/// is wiped when outgrown and when the returned body is released. What stays in libcurl's and
/// OpenSSL's memory, freed but not wiped: libcurl's send buffer (request line, headers and a
/// small body go out through it in one write), its receive buffer (the last 16 KiB read of the
/// answer), the header list we pass (`curl_slist` copies each line), and OpenSSL's TLS record
/// buffers. libcurl honours `SSLKEYLOGFILE` from the process environment (as every libcurl
/// program does): whoever sets a process's environment can already read its memory.
///
/// ```swift
/// let client = AuthorizationServerClient(configuration: configuration, transport: CurlTransport())
/// ```
public final class CurlTransport: HTTPTransport {
    /// The default answer limit: 256 KiB, the limit the response classifier parses (an OAuth
    /// answer or a key set is a few KiB at most).
    public static let defaultMaximumBodyBytes = ResponseClassifier.maximumBodyBytes

    /// The most answer body bytes read; beyond, the request fails without reading further.
    public let maximumBodyBytes: Int
    /// The environment proxies are taken from; `nil`: the process environment at each request.
    private let environment: [String: String]?

    /// A transport.
    /// - Parameters:
    ///   - maximumBodyBytes: the most answer body bytes read (at least 1).
    ///   - environment: where `http_proxy`, `https_proxy`, `all_proxy`, `no_proxy` (either case)
    ///     are read from; `nil` reads the process environment.
    public init(maximumBodyBytes: Int = defaultMaximumBodyBytes, environment: [String: String]? = nil) {
        self.maximumBodyBytes = max(1, maximumBodyBytes)
        self.environment = environment
    }

    /// Sends `request` once; the answer is returned whatever its status (3xx included).
    /// - Throws: ``TransportFailure``.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let transfer = CurlTransfer(
            curl: try CurlLibrary.shared.get(), request: request, maximumBodyBytes: maximumBodyBytes,
            environment: environment ?? ProcessInfo.processInfo.environment)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                let started = DetachedThread.start(name: "tokenstore-http") {
                    continuation.resume(with: transfer.run().mapError { $0 as any Error })
                }
                if !started {
                    continuation.resume(throwing: TransportFailure(.other, "No thread could be started for the request."))
                }
            }
        } onCancel: {
            transfer.cancel()
        }
    }

    // MARK: - Proxies

    /// The proxy settings for one request.
    struct ProxyChoice: Equatable {
        /// `CURLOPT_PROXY`: empty for none.
        var proxy: String
        /// `CURLOPT_NOPROXY`, when set.
        var noProxy: String?
    }

    /// The proxy for a request to `host` over `scheme`: none for a loopback host, else the
    /// environment's, as libcurl itself would pick it (`http_proxy` is read lower-case only,
    /// as libcurl does, so a CGI `Proxy:` header cannot set it).
    static func proxy(scheme: String, host: String, environment: [String: String]) -> ProxyChoice {
        if AuthorizationServerConfiguration.isLoopback(host: host) {
            return ProxyChoice(proxy: "", noProxy: "*")
        }
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        }
        let names = scheme.lowercased() == "http" ? ["http_proxy"] : ["https_proxy", "HTTPS_PROXY"]
        let proxy = names.lazy.compactMap { value($0) }.first ?? value("all_proxy", "ALL_PROXY") ?? ""
        return ProxyChoice(proxy: proxy, noProxy: value("no_proxy", "NO_PROXY"))
    }

    // MARK: - Errors

    /// Maps a libcurl result code (`CURLcode`) into a ``TransportFailure``.
    static func failure(forCurlCode rawCode: UInt32, cancelled: Bool) -> TransportFailure {
        let code = CURLcode(rawValue: rawCode)
        let error = CurlError(code: Int(rawCode), text: CurlLibrary.text(for: code))
        let text = "libcurl error \(rawCode)"
        switch code {
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT, CURLE_PROXY,
            CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_WEIRD_SERVER_REPLY,
            CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR:
            // GOT_NOTHING / PARTIAL_FILE / WEIRD_SERVER_REPLY: the connection dropped before a
            // complete answer (what URLSession reported as badServerResponse and friends).
            return TransportFailure(.notConnected, "\(text): host unreachable or connection lost.", underlying: error)
        case CURLE_OPERATION_TIMEDOUT:
            return TransportFailure(.timedOut, "\(text): timed out.", underlying: error)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CLIENTCERT:
            return TransportFailure(.tls, "\(text): TLS handshake or certificate failure.", underlying: error)
        case CURLE_ABORTED_BY_CALLBACK:
            return TransportFailure(.cancelled, "\(text): cancelled.", underlying: error)
        default:
            if cancelled { return TransportFailure(.cancelled, "\(text): cancelled.", underlying: error) }
            return TransportFailure(.other, "\(text).", underlying: error)
        }
    }
}

/// A libcurl result code, attached to a ``TransportFailure`` as its underlying error.
/// An app reads it only through `description`; the type is the package's.
package struct CurlError: Error, Sendable, CustomStringConvertible {
    /// The `CURLcode` value (stable across libcurl versions), such as 7 for `CURLE_COULDNT_CONNECT`.
    package let code: Int
    /// libcurl's generic text for the code (`curl_easy_strerror`: names no host and no data).
    package let text: String

    /// `libcurl error 7 (Couldn't connect to server)`.
    package var description: String { "libcurl error \(code) (\(text))" }
}
