import FoundationEssentials

/// A GET for a server's public metadata (its discovery document, its JSON Web Key Set): one
/// request, the transport's failures classified as for every endpoint, and the status read the
/// same way for both — 2xx is the body, 429 `rateLimited`, 5xx `serverError`, anything else
/// `unexpectedResponse`. Nothing is retried here; the caches above decide when to ask again.
enum MetadataFetch {
    /// What is fetched, as the error texts name it: "the discovery document", "the key set".
    struct Subject: Sendable {
        let noun: String
        fileprivate var capitalized: String { noun.prefix(1).uppercased() + noun.dropFirst() }
    }

    /// The body of `url`, at most `maximumBytes`.
    static func get(
        _ url: URL, _ subject: Subject, timeout: Duration, maximumBytes: Int, transport: any HTTPTransport
    ) async throws(AuthSessionError) -> Data {
        let response: HTTPResponse
        do {
            response = try await transport.send(
                HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"], timeout: timeout))
        } catch let failure as TransportFailure {
            throw ResponseClassifier.classify(failure).error
                ?? AuthSessionError(.unexpectedResponse, "\(subject.capitalized) could not be fetched.")
        } catch is CancellationError {
            throw AuthSessionError(.cancelled, "Fetching \(subject.noun) was cancelled.")
        } catch {
            throw AuthSessionError(
                .unexpectedResponse, "\(subject.capitalized) could not be fetched.", cause: .other("\(type(of: error))"))
        }
        switch response.status {
        case 200..<300:
            guard response.body.count <= maximumBytes else {
                throw AuthSessionError(.unexpectedResponse, "\(subject.capitalized) is too large.", httpStatus: response.status)
            }
            return response.body
        case 429:
            throw AuthSessionError(.rateLimited, "The server is rate limiting requests for \(subject.noun).", httpStatus: response.status)
        case 500..<600:
            throw AuthSessionError(.serverError, "The server failed to serve \(subject.noun).", httpStatus: response.status)
        default:
            throw AuthSessionError(
                .unexpectedResponse, "The request for \(subject.noun) got an unexpected status.", httpStatus: response.status)
        }
    }
}
