internal import CCurl
import FoundationEssentials
import TokenStore

/// One request through libcurl: its options, its callbacks and the answer being collected.
///
/// ``run()`` blocks (call it on a thread of its own); ``cancel()`` may come from any thread.
// @unchecked Sendable: `cancelled` and `multi` are read and written under `lock`; everything
// else is touched only by the thread in `run()` (libcurl calls the callbacks on that thread).
final class CurlTransfer: @unchecked Sendable {
    /// The most header bytes (all lines of all answers of the exchange) read.
    static let maximumHeaderBytes = 64 * 1024

    private let curl: CurlLibrary
    private let request: HTTPRequest
    private let limit: Int
    private let environment: [String: String]

    private let lock = Locked(())
    private var cancelled = false
    private var multi: UnsafeMutableRawPointer?

    // The answer being received (transfer thread only).
    private var body = WipedMemory()
    private var headers = HTTPHeaders()
    private var headerBytes = 0
    private var status = 0
    private var tooLarge = false

    init(curl: CurlLibrary, request: HTTPRequest, maximumBodyBytes: Int, environment: [String: String]) {
        self.curl = curl
        self.request = request
        self.limit = maximumBodyBytes
        self.environment = environment
    }

    /// Stops the transfer: wakes the transfer loop, and the progress callback aborts.
    func cancel() {
        lock.withLock { _ in
            cancelled = true
            if let multi { _ = curl.api.multi_wakeup(multi) }
        }
    }

    private var isCancelled: Bool { lock.withLock { _ in cancelled } }

    /// Performs the exchange (blocking).
    func run() -> Result<HTTPResponse, TransportFailure> {
        if isCancelled { return .failure(TransportFailure(.cancelled, "The request was cancelled before it started.")) }
        guard let easy = curl.api.easy_init(), let url = curl.api.url() else {
            return .failure(TransportFailure(.other, "libcurl could not make a transfer."))
        }
        defer {
            curl.api.easy_cleanup(easy)
            curl.api.url_cleanup(url)
        }
        var headerList: UnsafeMutablePointer<curl_slist>?
        var resolveList: UnsafeMutablePointer<curl_slist>?
        defer {
            curl.api.slist_free_all(headerList)
            curl.api.slist_free_all(resolveList)
        }
        let requestBody = request.body ?? Data()
        return requestBody.withUnsafeBytes { bytes in
            do throws(TransportFailure) {
                try configure(easy, url: url, body: bytes, headerList: &headerList, resolveList: &resolveList)
            } catch {
                return .failure(error)
            }
            let code = perform(easy)
            return answer(easy, code: code)
        }
    }

    // MARK: - Options

    private func configure(
        _ easy: UnsafeMutableRawPointer, url: OpaquePointer, body: UnsafeRawBufferPointer,
        headerList: inout UnsafeMutablePointer<curl_slist>?, resolveList: inout UnsafeMutablePointer<curl_slist>?
    ) throws(TransportFailure) {
        func check(_ code: CURLcode, _ what: String) throws(TransportFailure) {
            guard code == CURLE_OK else {
                throw TransportFailure(.other, "libcurl refused the \(what) setting.", underlying: CurlError(code: Int(code.rawValue), text: ""))
            }
        }
        func long(_ option: CURLoption, _ value: Int, _ what: String) throws(TransportFailure) {
            try check(tokenstore_curl_setopt_long(curl.table, easy, option, value), what)
        }
        func string(_ option: CURLoption, _ value: String, _ what: String) throws(TransportFailure) {
            try check(tokenstore_curl_setopt_string(curl.table, easy, option, value), what)
        }

        // The URL, parsed once by libcurl: the host the loopback rule looks at is the host the
        // transfer connects to.
        guard curl.api.url_set(url, CURLUPART_URL, request.url.absoluteString, 0) == CURLUE_OK,
            let scheme = part(url, CURLUPART_SCHEME), let host = part(url, CURLUPART_HOST)
        else {
            throw TransportFailure(.other, "The request URL is not one libcurl accepts.")
        }
        try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_CURLU, UnsafeRawPointer(url)), "URL")
        // Plain http only to loopback, checked here too (the configuration checks it first):
        // an IP literal in 127.0.0.0/8 or ::1, or exactly `localhost`, which is pinned to the
        // loopback addresses so that no resolver is asked (`localhost.` is not `localhost`: the
        // system resolver sends it to DNS).
        let loopback = AuthorizationServerConfiguration.isLoopback(host: host)
        if scheme.lowercased() == "http", !loopback {
            throw TransportFailure(.other, "Plain http:// is sent only to a loopback address.")
        }
        if host.lowercased() == "localhost" {
            guard let port = part(url, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)) else {
                throw TransportFailure(.other, "The request URL has no port libcurl can read.")
            }
            resolveList = curl.api.slist_append(resolveList, "localhost:\(port):127.0.0.1,[::1]")
            try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_RESOLVE, UnsafeRawPointer(resolveList)), "loopback address pin")
        }
        try string(CURLOPT_PROTOCOLS_STR, "http,https", "protocols")
        try string(CURLOPT_REDIR_PROTOCOLS_STR, "http,https", "redirect protocols")
        try long(CURLOPT_FOLLOWLOCATION, 0, "redirect")
        try long(CURLOPT_MAXREDIRS, 0, "redirect")
        try long(CURLOPT_NOSIGNAL, 1, "signal")
        try long(CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue), "netrc")

        // TLS 1.2 or later, peer and host verified, to the server and to an https proxy.
        try long(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2), "TLS version")
        try long(CURLOPT_SSL_VERIFYPEER, 1, "TLS peer verification")
        try long(CURLOPT_SSL_VERIFYHOST, 2, "TLS host verification")
        try long(CURLOPT_PROXY_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2), "proxy TLS version")
        try long(CURLOPT_PROXY_SSL_VERIFYPEER, 1, "proxy TLS peer verification")
        try long(CURLOPT_PROXY_SSL_VERIFYHOST, 2, "proxy TLS host verification")

        // Proxies: never for loopback; otherwise the environment's, always through a tunnel.
        let choice = CurlTransport.proxy(scheme: scheme, host: host, environment: environment)
        try string(CURLOPT_PROXY, choice.proxy, "proxy")
        if let noProxy = choice.noProxy { try string(CURLOPT_NOPROXY, noProxy, "no-proxy") }
        try long(CURLOPT_HTTPPROXYTUNNEL, 1, "proxy tunnel")
        try long(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1, "proxy headers")

        // Time: the whole exchange, connect included (0 would mean "no limit": at least 1 ms).
        let milliseconds = Self.milliseconds(request.timeout)
        try long(CURLOPT_TIMEOUT_MS, milliseconds, "timeout")
        try long(CURLOPT_CONNECTTIMEOUT_MS, milliseconds, "connect timeout")

        // The answer: bounded, collected by the callbacks below; progress for cancellation.
        try check(tokenstore_curl_setopt_offset(curl.table, easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit)), "size limit")
        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        try check(tokenstore_curl_setopt_write(curl.table, easy, CURLOPT_WRITEFUNCTION, curlTransferWrite), "write callback")
        try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_WRITEDATA, context), "write callback")
        try check(tokenstore_curl_setopt_write(curl.table, easy, CURLOPT_HEADERFUNCTION, curlTransferHeader), "header callback")
        try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_HEADERDATA, context), "header callback")
        try check(tokenstore_curl_setopt_xferinfo(curl.table, easy, curlTransferProgress), "progress callback")
        try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_XFERINFODATA, context), "progress callback")
        try long(CURLOPT_NOPROGRESS, 0, "progress callback")

        // Header fields: no line breaks (no header injection); no `Expect: 100-continue`.
        for field in request.headers {
            guard Self.isToken(field.name), !field.value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) else {
                throw TransportFailure(.other, "A request header field is not valid.")
            }
            headerList = curl.api.slist_append(headerList, "\(field.name): \(field.value)")
        }
        headerList = curl.api.slist_append(headerList, "Expect:")
        try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_HTTPHEADER, UnsafeRawPointer(headerList)), "header fields")

        // Method and body: the body is sent from the caller's bytes (not copied by us).
        let method = request.method.uppercased()
        guard Self.isToken(method) else { throw TransportFailure(.other, "The request method is not valid.") }
        if request.body != nil {
            try check(tokenstore_curl_setopt_offset(curl.table, easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), "body")
            try check(tokenstore_curl_setopt_pointer(curl.table, easy, CURLOPT_POSTFIELDS, body.baseAddress ?? UnsafeRawPointer(("" as StaticString).utf8Start)), "body")
            if method != "POST" { try string(CURLOPT_CUSTOMREQUEST, method, "method") }
        } else if method == "GET" {
            try long(CURLOPT_HTTPGET, 1, "method")
        } else if method == "HEAD" {
            try long(CURLOPT_NOBODY, 1, "method")
        } else {
            try string(CURLOPT_CUSTOMREQUEST, method, "method")
        }
    }

    private func part(_ url: OpaquePointer, _ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl.api.url_get(url, which, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl.api.free(value) }
        return String(cString: value)
    }

    static func milliseconds(_ duration: Duration) -> Int {
        max(1, Int(clamping: duration.roundedUpMilliseconds))
    }

    /// An RFC 9110 token (method or field name).
    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
    }

    // MARK: - The transfer loop

    /// Runs the transfer through a multi handle so ``cancel()`` can wake its wait at once.
    private func perform(_ easy: UnsafeMutableRawPointer) -> CURLcode {
        guard let handle = curl.api.multi_init() else { return CURLE_OUT_OF_MEMORY }
        defer { _ = curl.api.multi_cleanup(handle) }
        guard curl.api.multi_add_handle(handle, easy) == CURLM_OK else { return CURLE_OUT_OF_MEMORY }
        defer { _ = curl.api.multi_remove_handle(handle, easy) }
        let startCancelled = lock.withLock { _ -> Bool in
            multi = handle
            return cancelled
        }
        defer { lock.withLock { _ in multi = nil } }
        if startCancelled { return CURLE_ABORTED_BY_CALLBACK }

        var running: Int32 = 1
        while true {
            guard curl.api.multi_perform(handle, &running) == CURLM_OK else { return CURLE_OUT_OF_MEMORY }
            if running == 0 { break }
            if isCancelled { return CURLE_ABORTED_BY_CALLBACK }
            guard curl.api.multi_poll(handle, nil, 0, 1000, nil) == CURLM_OK else { return CURLE_OUT_OF_MEMORY }
        }
        var queued: Int32 = 0
        var result = CURLE_GOT_NOTHING
        while let message = curl.api.multi_info_read(handle, &queued) {
            if message.pointee.msg == CURLMSG_DONE { result = message.pointee.data.result }
        }
        return result
    }

    private func answer(_ easy: UnsafeMutableRawPointer, code: CURLcode) -> Result<HTTPResponse, TransportFailure> {
        if tooLarge || code == CURLE_FILESIZE_EXCEEDED {
            return .failure(
                TransportFailure(
                    .other, "The answer is larger than \(limit) bytes; it was not read.",
                    underlying: CurlError(code: Int(code.rawValue), text: curl.text(for: code))))
        }
        let cancelled = isCancelled
        guard code == CURLE_OK else {
            return .failure(CurlTransport.failure(forCurlCode: code.rawValue, cancelled: cancelled))
        }
        var responseCode = 0
        _ = tokenstore_curl_getinfo_long(curl.table, easy, CURLINFO_RESPONSE_CODE, &responseCode)
        guard responseCode >= 100 else {
            return .failure(TransportFailure(.other, "The answer was not an HTTP response."))
        }
        return .success(HTTPResponse(status: responseCode, headers: headers, body: body.takeData()))
    }

    // MARK: - Callbacks (on the transfer thread)

    /// Appends body bytes; returns `false` past the limit, which stops the transfer.
    fileprivate func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.append(bytes, limit: limit) else {
            tooLarge = true
            return false
        }
        return true
    }

    /// Takes one header line (status lines included); returns `false` to stop the transfer.
    fileprivate func receiveHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        headerBytes += line.count
        guard headerBytes <= Self.maximumHeaderBytes else {
            tooLarge = true
            return false
        }
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<end]), as: UTF8.self)
        if text.hasPrefix("HTTP/") {
            // A new answer (after a 1xx, or the first): only the last one's fields are kept.
            headers = HTTPHeaders()
            status = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return true
        }
        guard let colon = text.firstIndex(of: ":") else { return true }  // blank line, folding
        let name = trimmingWhitespace(text[..<colon])
        let value = trimmingWhitespace(text[text.index(after: colon)...])
        if status >= 200, name.lowercased() == "content-length" {
            // Refused before any body byte: a length past the limit, or one that is no number.
            let digits = value.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            guard digits, let length = Int(value), length <= limit else {
                tooLarge = true
                return false
            }
        }
        headers.add(name: name, value: value)
        return true
    }

    fileprivate var shouldAbort: Bool { isCancelled }
}

// libcurl's callbacks: C functions, handed the transfer as their user data.

private let curlTransferWrite: curl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let total = size * count
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
}

private let curlTransferHeader: curl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let total = size * count
    return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
}

private let curlTransferProgress: curl_xferinfo_callback = { context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().shouldAbort ? 1 : 0
}

/// `text` without leading and trailing whitespace as `CharacterSet.whitespaces` has it (Zs and tab).
private func trimmingWhitespace(_ text: Substring) -> String {
    func isSpace(_ c: Character) -> Bool {
        c.unicodeScalars.allSatisfy { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
    }
    guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else {
        return ""
    }
    return String(text[first...last])
}
