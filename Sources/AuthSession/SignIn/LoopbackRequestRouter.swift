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
/// - `GET {startPath}` (`/start/<one-time id>`, the address the browser is given) answers
///   once with a `302` to the authorization URL, so that the URL (its `state`, `nonce` and
///   PKCE challenge) is never on a command line; a second request gets a refusal page (410).
/// - The callback and the start page need `Host: 127.0.0.1:PORT`, exactly once: another host
///   (a DNS-rebinding page's name) gets a 400 and does not count as the callback.
/// - Anything else (`/favicon.ico`, other paths, other methods) gets a 404 and the wait goes on.
///
/// The query's `error_description` is untrusted text: whoever sent the redirect chose it.
/// It is only kept (sanitized) in ``AuthSessionError/oauthErrorDescription``, never echoed.
struct LoopbackRequestRouter: Sendable {
    /// What the listener does after answering a request.
    enum Outcome: Sendable {
        /// Keep waiting for the real callback.
        case keepWaiting
        /// Keep waiting; the request was a callback with a wrong or missing `state`.
        case refusedState
        /// Keep waiting; the start page was served (its `302` sent), or refused as used.
        case servedStart
        /// The sign-in has its answer: close the listener once the page is sent.
        case finished(Result<AuthorizationCallback, AuthSessionError>)
    }

    /// The answer to one request: the bytes to send and what happens next.
    struct Decision: Sendable {
        let response: [UInt8]
        let outcome: Outcome
    }

    /// Where the one-time start page stands.
    enum Start: Sendable {
        /// Not offered (the sign-in gave the browser the authorization URL itself).
        case none
        /// Not served yet: its `302` goes to this URL.
        case pending(location: String)
        /// Served once already.
        case used
    }

    let callbackPath: String
    let expectedState: String
    let redirectURI: URL
    /// `/start/<one-time id>`.
    let startPath: String
    /// The listener waits for the end of a browser session (a logout's return), not a sign-in's:
    /// a callback with the right `state` and no `error` ends the wait, no code needed.
    var endsSession = false

    /// `127.0.0.1:PORT`: the only `Host` the callback and the start page accept.
    var expectedHost: String { "127.0.0.1:\(redirectURI.port ?? 80)" }

    // MARK: Routing

    /// Decides on a complete request head (request line and header fields, up to the empty line).
    func route(head: ArraySlice<UInt8>, start: Start = .none) -> Decision {
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
        guard method.elementsEqual("GET".utf8) else {
            return Decision(response: Self.page(.notFound), outcome: .keepWaiting)
        }
        let isStart = ConstantTime.equal(Array(path), Array(startPath.utf8))
        guard isStart || path.elementsEqual(callbackPath.utf8) else {
            return Decision(response: Self.page(.notFound), outcome: .keepWaiting)
        }
        guard Self.hosts(in: head).elementsEqual([Array(expectedHost.utf8)]) else {
            return Decision(response: Self.page(.wrongHost), outcome: .keepWaiting)
        }
        if isStart {
            switch start {
            case .none: return Decision(response: Self.page(.notFound), outcome: .keepWaiting)
            case .used: return Decision(response: Self.page(.startUsed), outcome: .servedStart)
            case .pending(let location): return Decision(response: Self.redirect(to: location), outcome: .servedStart)
            }
        }
        guard let parameters = Self.parameters(of: query) else {
            return Decision(response: Self.page(.badRequest), outcome: .keepWaiting)
        }
        // The state first: nothing else in a request is trusted before it matches.
        guard let state = parameters["state"], ConstantTime.equal(state, Array(expectedState.utf8)) else {
            return Decision(response: Self.page(.wrongState), outcome: .refusedState)
        }
        if let error = parameters["error"] {
            // `error_description` is untrusted text (whoever sent the redirect chose it): kept
            // sanitized for diagnosis, never shown in the page.
            let failure = AuthSessionError(
                .authorizationFailed, "The authorization server ended the sign-in with an error.",
                oauthError: String(decoding: error, as: UTF8.self),
                oauthErrorDescription: parameters["error_description"].map { String(decoding: $0, as: UTF8.self) })
            return Decision(response: Self.page(.serverError), outcome: .finished(.failure(failure)))
        }
        if endsSession {
            let callback = AuthorizationCallback(code: SecretBytes([UInt8]()), redirectURI: redirectURI)
            return Decision(response: Self.page(.loggedOut), outcome: .finished(.success(callback)))
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

    /// The values of every `Host` field of a head (name case-insensitive, spaces trimmed).
    static func hosts(in head: ArraySlice<UInt8>) -> [[UInt8]] {
        var values: [[UInt8]] = []
        let lines = head.split(separator: 0x0A, omittingEmptySubsequences: true).dropFirst()
        for line in lines {
            let trimmedLine = line.last == 0x0D ? line.dropLast() : line
            guard let colon = trimmedLine.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = trimmedLine[..<colon]
            guard name.count == 4, name.map({ $0 | 0x20 }).elementsEqual("host".utf8) else { continue }
            var value = trimmedLine[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            values.append(Array(value))
        }
        return values
    }

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
        case signedIn, serverError, incomplete, wrongState, notFound, badRequest, tooLarge, wrongHost, startUsed
        case loggedOut

        var status: String {
            switch self {
            case .signedIn, .serverError, .loggedOut: return "200 OK"
            case .incomplete, .wrongState, .badRequest, .wrongHost: return "400 Bad Request"
            case .startUsed: return "410 Gone"
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
            case .loggedOut:
                return ("Signed out", "You are signed out. You can close this window and return to the app.")
            case .notFound:
                return ("Not found", "Nothing here.")
            case .badRequest:
                return ("Bad request", "The request could not be read.")
            case .tooLarge:
                return ("Request too large", "The request was too large.")
            case .wrongHost:
                return ("Bad request", "This page answers only at the address the app opened (127.0.0.1).")
            case .startUsed:
                return (
                    "Sign-in link already used",
                    "This sign-in link works once and was already opened. Use the window it opened, "
                        + "or start again from the app.")
            }
        }
    }

    /// A complete HTTP/1.1 answer with a small static HTML page (no request data is echoed).
    static func page(_ page: Page) -> [UInt8] {
        let (title, text) = page.text
        return answer(status: page.status, location: nil, title: title, text: text)
    }

    /// The start page's `302 Found` to the authorization URL, with the same no-store headers.
    static func redirect(to location: String) -> [UInt8] {
        answer(status: "302 Found", location: location, title: "Signing in", text: "Continuing to the sign-in page.")
    }

    private static func answer(status: String, location: String?, title: String, text: String) -> [UInt8] {
        let body = Array(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(title)</title></head>"
                .utf8) + Array("<body><h1>\(title)</h1><p>\(text)</p></body></html>\n".utf8)
        let head =
            "HTTP/1.1 \(status)\r\n"
            + (location.map { "Location: \($0)\r\n" } ?? "")
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
