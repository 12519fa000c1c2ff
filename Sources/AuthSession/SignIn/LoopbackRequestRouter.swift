import FoundationEssentials
import TokenStore

/// The HTTP side of the loopback redirect listener, without any I/O: what one request head
/// means and which bytes answer it.
///
/// - `GET {callbackPath}?…&state=<the expected state>&code=…` ends the wait with the code.
/// - `GET {callbackPath}?…&state=<the expected state>&error=…` ends the wait with
///   ``AuthSessionError/Code/authorizationFailed``.
/// - A callback with a wrong or missing `state` — whatever else it carries, `error=` included —
///   is refused with an error page and the wait goes on: a forged request (another local
///   process, a web page poking at loopback ports) or a stale tab of an earlier attempt must
///   not end the sign-in in progress.
/// - Anything else (`/favicon.ico`, other paths, other methods) gets a 404 and the wait goes on.
struct LoopbackRequestRouter: Sendable {
    /// What the listener does after answering a request.
    enum Outcome: Sendable {
        /// Keep waiting for the real callback.
        case keepWaiting
        /// Keep waiting; the request was a callback with a wrong or missing `state`.
        case refusedState
        /// The sign-in has its answer: close the listener once the page is sent.
        case finished(Result<AuthorizationCallback, AuthSessionError>)
    }

    /// The answer to one request: the bytes to send and what happens next.
    struct Decision: Sendable {
        let response: [UInt8]
        let outcome: Outcome
    }

    let callbackPath: String
    let expectedState: String
    let redirectURI: URL

    // MARK: Routing

    /// Decides on a complete request head (request line and header fields, up to the empty line).
    func route(head: ArraySlice<UInt8>) -> Decision {
        guard let (method, target) = Self.requestLine(of: head) else {
            return Decision(response: Self.page(.badRequest), outcome: .keepWaiting)
        }
        let path: ArraySlice<UInt8>
        let query: ArraySlice<UInt8>
        if let mark = target.firstIndex(of: UInt8(ascii: "?")) {
            path = target[..<mark]
            query = target[(mark + 1)...]
        } else {
            path = target
            query = []
        }
        guard method.elementsEqual("GET".utf8), path.elementsEqual(callbackPath.utf8) else {
            return Decision(response: Self.page(.notFound), outcome: .keepWaiting)
        }
        guard let parameters = Self.parameters(of: query) else {
            return Decision(response: Self.page(.badRequest), outcome: .keepWaiting)
        }
        // The state first: nothing else in a request is trusted before it matches.
        guard let state = parameters["state"], ConstantTime.equal(state, Array(expectedState.utf8)) else {
            return Decision(response: Self.page(.wrongState), outcome: .refusedState)
        }
        if let error = parameters["error"] {
            let failure = AuthSessionError(
                .authorizationFailed, "The authorization server ended the sign-in with an error.",
                oauthError: String(decoding: error, as: UTF8.self),
                oauthErrorDescription: parameters["error_description"].map { String(decoding: $0, as: UTF8.self) })
            return Decision(response: Self.page(.serverError), outcome: .finished(.failure(failure)))
        }
        guard let code = parameters["code"], !code.isEmpty else {
            let failure = AuthSessionError(
                .unexpectedResponse, "The sign-in redirect carried neither a code nor an error.")
            return Decision(response: Self.page(.incomplete), outcome: .finished(.failure(failure)))
        }
        let callback = AuthorizationCallback(
            code: SecretBytes(code), redirectURI: redirectURI,
            issuer: parameters["iss"].map { String(decoding: $0, as: UTF8.self) })
        return Decision(response: Self.page(.signedIn), outcome: .finished(.success(callback)))
    }

    /// The answer to a head larger than the listener accepts.
    static var tooLargeResponse: [UInt8] { page(.tooLarge) }

    /// The index just past the empty line that ends a request head in `buffer`, if complete.
    static func endOfHead(in buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 3..<buffer.count
        where buffer[index] == 0x0A && buffer[index - 1] == 0x0D && buffer[index - 2] == 0x0A
            && buffer[index - 3] == 0x0D
        {
            return index + 1
        }
        return nil
    }

    // MARK: Parsing

    /// `METHOD SP request-target SP HTTP/1.x` (RFC 9112 §3), or `nil`.
    static func requestLine(of head: ArraySlice<UInt8>) -> (method: ArraySlice<UInt8>, target: ArraySlice<UInt8>)? {
        guard let end = head.firstIndex(of: 0x0D), end + 1 < head.endIndex, head[end + 1] == 0x0A else { return nil }
        let parts = head[..<end].split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[1].first == UInt8(ascii: "/"),
            parts[2].starts(with: "HTTP/1.".utf8), parts[2].count == 8
        else { return nil }
        return (parts[0], parts[1])
    }

    /// The query's parameters, percent-decoded (`+` as a space), or `nil` for a malformed
    /// escape or a parameter that appears twice (RFC 6749 §3.1).
    static func parameters(of query: ArraySlice<UInt8>) -> [String: [UInt8]]? {
        var result: [String: [UInt8]] = [:]
        var fragmentFree = query
        if let hash = query.firstIndex(of: UInt8(ascii: "#")) { fragmentFree = query[..<hash] }
        for pair in fragmentFree.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let pieces = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let nameBytes = percentDecode(pieces[0]),
                let value = percentDecode(pieces.count > 1 ? pieces[1] : [])
            else { return nil }
            let name = String(decoding: nameBytes, as: UTF8.self)
            guard result[name] == nil else { return nil }
            result[name] = value
        }
        return result
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return nil }
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
                index += 1
            }
        }
        return output
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    // MARK: Pages

    enum Page {
        case signedIn, serverError, incomplete, wrongState, notFound, badRequest, tooLarge

        var status: String {
            switch self {
            case .signedIn, .serverError: return "200 OK"
            case .incomplete, .wrongState, .badRequest: return "400 Bad Request"
            case .notFound: return "404 Not Found"
            case .tooLarge: return "431 Request Header Fields Too Large"
            }
        }

        var text: (title: String, body: String) {
            switch self {
            case .signedIn:
                return ("Signed in", "You are signed in. You can close this window and return to the app.")
            case .serverError:
                return ("Sign-in not completed", "The sign-in was not completed. You can close this window and return to the app.")
            case .incomplete:
                return ("Sign-in not completed", "The sign-in answer was incomplete. You can close this window and try again from the app.")
            case .wrongState:
                return (
                    "Sign-in answer refused",
                    "This answer does not belong to the sign-in in progress (state mismatch) and was refused. "
                        + "You can close this window; to sign in, use the window the app opened or start again from the app.")
            case .notFound:
                return ("Not found", "Nothing here.")
            case .badRequest:
                return ("Bad request", "The request could not be read.")
            case .tooLarge:
                return ("Request too large", "The request was too large.")
            }
        }
    }

    /// A complete HTTP/1.1 answer with a small static HTML page (no request data is echoed).
    static func page(_ page: Page) -> [UInt8] {
        let (title, text) = page.text
        let body = Array(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(title)</title></head>"
                .utf8) + Array("<body><h1>\(title)</h1><p>\(text)</p></body></html>\n".utf8)
        let head =
            "HTTP/1.1 \(page.status)\r\n"
            + "Content-Type: text/html; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\n"
            + "Cache-Control: no-store\r\n"
            + "Content-Security-Policy: default-src 'none'\r\n"
            + "Referrer-Policy: no-referrer\r\n"
            + "X-Content-Type-Options: nosniff\r\n"
            + "Connection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}
