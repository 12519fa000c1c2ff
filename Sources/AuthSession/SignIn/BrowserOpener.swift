internal import CGIO
import FoundationEssentials
import TokenStore

/// Opens a URL in the user's web browser: the first step of the browser sign-in.
///
/// The sign-in calls ``open(_:)`` with the authorization URL and then waits for the
/// redirect on its loopback listener, so an opener returns as soon as a browser was
/// started; it never waits for the user. Apps may pass their own opener (a sandboxed app
/// with its own portal code, a test driving a headless browser).
///
/// ```swift
/// struct PrintingOpener: BrowserOpener {
///     func open(_ url: URL) async throws { print("Open this address to sign in:", url) }
/// }
/// ```
///
/// The browser sign-in gives openers the listener's one-time start address
/// (`http://127.0.0.1:PORT/start/<id>`), never the authorization URL: it holds no `state`,
/// `nonce` nor PKCE challenge and may go on a command line, which every local user can
/// read. It still opens this sign-in once: an opener must not log it.
public protocol BrowserOpener: Sendable {
    /// Opens `url` in the user's browser; returns once a browser (or the handler that
    /// forwards to one) was started.
    /// - Throws: ``AuthSessionError`` ``AuthSessionError/Code/browserUnavailable`` when no
    ///   browser could be started, ``AuthSessionError/Code/cancelled`` on task cancellation.
    func open(_ url: URL) async throws
}

/// The default ``BrowserOpener`` on Linux, trying in order:
///
/// 1. **`$BROWSER`**, when set: each of its `:`-separated commands in turn, with the URL as
///    the last argument (or in place of `%s`), as xdg-open and Python's `webbrowser` do.
///    The command runs directly through `posix_spawn`, never through a shell.
/// 2. **GIO**, `g_app_info_launch_default_for_uri`: the desktop's default handler for
///    `http`/`https`, and inside a sandbox (Flatpak) the OpenURI portal.
/// 3. **`xdg-open`**.
///
/// A command counts as started when it is still running after a short check (half a second
/// by default) or exited with status 0 within it; a non-zero exit moves on to the next way.
/// Started commands are reaped when they exit, so no zombie is left. Their output goes to
/// `/dev/null`, and the URL is never logged nor put into an error.
///
/// ```swift
/// try await SystemBrowserOpener().open(authorizationURL)
/// ```
public struct SystemBrowserOpener: BrowserOpener {
    /// The ways to open a URL, in the order tried.
    enum Method: String, Sendable, CaseIterable {
        case environmentBrowser = "$BROWSER"
        case gio = "GIO"
        case xdgOpen = "xdg-open"
    }

    private let environment: [String: String]?
    private let startCheck: Duration
    private let methods: [Method]
    private let logger: TokenStoreLogger

    /// The default opener.
    ///
    /// - Parameters:
    ///   - environment: where `$BROWSER` and `PATH` are read, and the environment of the
    ///     commands started; `nil` (the default) is this process's environment. GIO always
    ///     uses this process's environment.
    ///   - startCheck: how long a started command is watched for an early failure.
    ///   - logger: records which way worked (never the URL).
    public init(
        environment: [String: String]? = nil, startCheck: Duration = .milliseconds(500),
        logger: TokenStoreLogger = .disabled
    ) {
        self.init(environment: environment, startCheck: startCheck, methods: Method.allCases, logger: logger)
    }

    /// An opener limited to `methods` (tests use `$BROWSER` alone, so no real browser opens).
    init(environment: [String: String]?, startCheck: Duration, methods: [Method], logger: TokenStoreLogger) {
        self.environment = environment
        self.startCheck = startCheck
        self.methods = methods
        self.logger = logger
    }

    /// Opens `url` with the first way that works.
    /// - Throws: ``AuthSessionError/Code/browserUnavailable`` listing what was tried (program
    ///   names and exit statuses only), ``AuthSessionError/Code/cancelled``.
    public func open(_ url: URL) async throws {
        if Task.isCancelled { throw AuthSessionError(.cancelled, "Opening the browser was cancelled.") }
        let opener = self
        // Blocking work (spawn checks, a GIO call that may talk to D-Bus) runs on a thread of
        // its own, never on the cooperative pool.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let started = DetachedThread.start(name: "tokenstore-browser-open") {
                continuation.resume(with: Result { try opener.openBlocking(url.absoluteString) })
            }
            if !started {
                continuation.resume(
                    throwing: AuthSessionError(.browserUnavailable, "No thread could be started to open the browser."))
            }
        }
    }

    private func openBlocking(_ url: String) throws(AuthSessionError) {
        let environment = self.environment ?? ProcessInfo.processInfo.environment
        var attempts: [String] = []
        for method in methods {
            switch method {
            case .environmentBrowser:
                guard let value = environment["BROWSER"], !value.isEmpty else { continue }
                for (index, words) in BrowserCommandLine.commands(in: value).enumerated() {
                    let label = "$BROWSER entry \(index + 1)"
                    guard let words else {
                        attempts.append("\(label): unterminated quote")
                        continue
                    }
                    let program = Self.programName(words[0])
                    let outcome = BrowserProcess.start(
                        BrowserCommandLine.arguments(words, url: url), environment: environment, startCheck: startCheck)
                    if outcome == .started {
                        logger.info("browser opened", metadata: ["browser.method": label, "browser.program": program])
                        return
                    }
                    attempts.append("\(label) (\(program)): \(outcome.summary)")
                }
            case .gio:
                if let failure = Self.openWithGIO(url) {
                    attempts.append("GIO: \(failure)")
                    continue
                }
                logger.info("browser opened", metadata: ["browser.method": "GIO"])
                return
            case .xdgOpen:
                let outcome = BrowserProcess.start(["xdg-open", url], environment: environment, startCheck: startCheck)
                if outcome == .started {
                    logger.info("browser opened", metadata: ["browser.method": "xdg-open"])
                    return
                }
                attempts.append("xdg-open: \(outcome.summary)")
            }
        }
        logger.warning("no browser could be opened", metadata: ["browser.attempts": "\(attempts.count)"])
        let tried = attempts.isEmpty ? "nothing to try" : attempts.joined(separator: "; ")
        throw AuthSessionError(
            .browserUnavailable,
            "No browser could be opened (\(tried)). Set $BROWSER, install xdg-utils, or pass a BrowserOpener.")
    }

    /// `g_app_info_launch_default_for_uri`; `nil` on success, else the GError's domain and
    /// code (its message may quote the URL, so it is not kept).
    private static func openWithGIO(_ url: String) -> String? {
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_default_for_uri(url, nil, &error) != 0 { return nil }
        guard let error else { return "failed" }
        defer { g_error_free(error) }
        let domain = g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "GError"
        return "\(domain) \(error.pointee.code)"
    }

    /// The last path component of a program (what a log line or an error may show).
    private static func programName(_ program: String) -> String {
        let name = program.split(separator: "/").last.map(String.init) ?? program
        return String(name.prefix(64))
    }
}
