internal import CGlibcExtensions
import FoundationEssentials
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// A one-shot HTTP/1.1 server on `127.0.0.1` that receives the browser's redirect at the
/// end of a sign-in (RFC 8252 §7.3 loopback redirect).
///
/// - **Binding.** Binds `127.0.0.1` only (never `0.0.0.0`, never `localhost`), trying
///   `ports` in order: a port in use (`EADDRINUSE`) moves on to the next. Auth0 matches
///   callback URLs exactly, so every port the app may use must be registered as
///   `http://127.0.0.1:PORT/callback`. Port `0` takes any free port (for servers that
///   follow RFC 8252's any-port rule; tests use it). The socket is bound when the listener
///   is made, so ``redirectURI`` can go into the authorization URL before the browser opens.
/// - **Only this user.** Each accepted connection's peer must belong to this process's
///   effective uid (``LoopbackPeer``, from the kernel's socket table); any other connection,
///   or one whose owner cannot be found, is closed before a byte is read and never takes a
///   slot. Refusals are counted (``refusedPeers`` in the logs and the time-out's message).
/// - **Answers.** See ``LoopbackRequestRouter``: the callback with the right `state` ends the
///   wait (with the code, or ``AuthSessionError/Code/authorizationFailed`` for `error=`);
///   a callback with a wrong `state` or `Host` is refused with an error page **and the wait
///   goes on**, so a forged request cannot end the sign-in; ``startURL(for:)``'s one-time
///   page redirects once to the authorization URL; everything else gets a 404.
/// - **Limits.** A request head is bounded (8 KiB: 431 beyond), a connection that sent
///   nothing goes after an idle time-out (2 s), each connection must deliver its head within
///   a read time-out (10 s) and take its answer within a write time-out (2 s), at most 16
///   connections are served at once, and the kernel's backlog is `SOMAXCONN`; a slow client
///   holds only its own connection, never the others.
/// - **End.** The wait ends at the answer, at the total time-out (default 5 minutes:
///   ``AuthSessionError/Code/timedOut``, or ``AuthSessionError/Code/stateMismatch`` when
///   only wrong-state redirects came), or at task cancellation
///   (``AuthSessionError/Code/cancelled``). In every case all sockets are closed and the
///   port is free again before `waitForCallback` returns or throws.
///
/// Serving runs on a thread of its own (`poll(2)` on non-blocking sockets), never on the
/// cooperative pool. Each listener is independent: several may run in one process.
///
/// ```swift
/// let listener = try LoopbackRedirectListener(ports: [53682, 53683], expectedState: secrets.state)
/// // …build the authorization URL with listener.redirectURI, open the browser…
/// let callback = try await listener.waitForCallback()
/// ```
///
/// No request data (query, code, state, error text) is ever logged.
// @unchecked Sendable: `phase`, `stopRequested` and the descriptors are read and written
// under `lock`; once `waitForCallback` started, the sockets belong to the serving thread.
final class LoopbackRedirectListener: @unchecked Sendable {
    /// The total time a sign-in may take, by default.
    static let defaultTimeout: Duration = .seconds(300)

    /// The port actually bound.
    let port: UInt16
    /// `http://127.0.0.1:{port}{callbackPath}`: the `redirect_uri` of the authorization and
    /// token requests.
    let redirectURI: URL

    /// `http://127.0.0.1:{port}/start/<one-time id>`: see ``startURL(for:)``.
    let startAddress: URL

    private let router: LoopbackRequestRouter
    let limits: Limits
    let logger: TokenStoreLogger

    enum Phase { case bound, serving, closed }

    let lock = Locked(())
    var phase = Phase.bound
    var stopRequested = false
    var listenDescriptor: Int32
    var wakeRead: Int32
    var wakeWrite: Int32
    /// The authorization URL the start page redirects to, once ``startURL(for:)`` gave it.
    private var startLocation: String?

    /// Binds the first free port of `ports` on `127.0.0.1`.
    ///
    /// - Parameters:
    ///   - ports: the ports to try, in order (`0`: any free port).
    ///   - expectedState: the `state` sent in the authorization request.
    ///   - callbackPath: the path of the redirect URI, starting with `/`.
    /// - Throws: ``AuthSessionError/Code/loopbackUnavailable`` when every port is in use or
    ///   a socket cannot be made; ``AuthSessionError/Code/insecureConfiguration`` for an
    ///   empty port list, an empty state or a callback path that is not a plain path.
    init(
        ports: [UInt16], expectedState: String, callbackPath: String = "/callback", limits: Limits = Limits(),
        endsSession: Bool = false, logger: TokenStoreLogger = .disabled
    ) throws(AuthSessionError) {
        guard !ports.isEmpty else {
            throw AuthSessionError(.insecureConfiguration, "No loopback port is configured for the sign-in redirect.")
        }
        guard !expectedState.isEmpty else {
            throw AuthSessionError(.insecureConfiguration, "The sign-in state is empty.")
        }
        guard callbackPath.hasPrefix("/"),
            callbackPath.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else {
            throw AuthSessionError(.insecureConfiguration, "The callback path must be a plain absolute path.")
        }
        var bound: (descriptor: Int32, port: UInt16)?
        var portsInUse = 0
        for candidate in ports {
            switch LoopbackSocket.bindLoopback(port: candidate) {
            case .bound(let descriptor, let port):
                bound = (descriptor, port)
            case .inUse:
                portsInUse += 1
                logger.debug("loopback port in use, trying the next", metadata: ["loopback.port": "\(candidate)"])
                continue
            case .failed(let call, let number):
                throw AuthSessionError(
                    .loopbackUnavailable, "Could not open the loopback listener (\(call): \(LoopbackSocket.errorName(number))).")
            }
            break
        }
        guard let bound else {
            throw AuthSessionError(
                .loopbackUnavailable,
                "Every configured loopback port is in use (\(portsInUse) tried); close the program holding them or "
                    + "register more ports.")
        }
        // The wake-up channel of the serving thread's poll (a socket pair: close-on-exec and
        // non-blocking from the start, with no GNU call).
        var wake: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | LoopbackSocket.socketFlags, 0, &wake) == 0 else {
            let number = errno
            Glibc.close(bound.descriptor)
            throw AuthSessionError(
                .loopbackUnavailable, "Could not open the loopback listener (socketpair: \(LoopbackSocket.errorName(number))).")
        }
        listenDescriptor = bound.descriptor
        wakeRead = wake[0]
        wakeWrite = wake[1]
        port = bound.port
        // Validated above: a plain path and a numeric host always make a URL.
        redirectURI = URL(string: "http://127.0.0.1:\(bound.port)\(callbackPath)")!
        // 32 random bytes in base64url: a plain path.
        let startPath = "/start/" + SignInRandom.token()
        startAddress = URL(string: "http://127.0.0.1:\(bound.port)\(startPath)")!
        router = LoopbackRequestRouter(
            callbackPath: callbackPath, expectedState: expectedState, redirectURI: redirectURI, startPath: startPath,
            endsSession: endsSession)
        self.limits = limits
        self.logger = logger
        logger.debug("loopback listener bound", metadata: ["loopback.port": "\(bound.port)"])
    }

    /// The one-time address to give the browser instead of `authorizationURL`, which carries
    /// the sign-in's `state`, `nonce` and PKCE challenge and so must not go on a command line
    /// (`/proc/PID/cmdline` is readable by every local user). The listener answers it once,
    /// to a peer of this user only, with a `302` to `authorizationURL`; a second request gets
    /// a refusal page. Call it before ``waitForCallback(timeout:)``.
    func startURL(for authorizationURL: URL) -> URL {
        lock.withLock { _ in startLocation = authorizationURL.absoluteString }
        return startAddress
    }

    deinit {
        // Only a listener that never served (or finished) gets here: the serving thread keeps it alive.
        closeDescriptors()
    }

    /// Waits for the redirect and returns its code; the listener is closed when this returns
    /// or throws, and cannot be used again.
    ///
    /// - Parameter timeout: the total time to wait, from this call.
    /// - Throws: ``AuthSessionError`` — `authorizationFailed` (the server's `error=`),
    ///   `unexpectedResponse` (a matching redirect with neither code nor error), `timedOut`,
    ///   `stateMismatch` (time-out after only wrong-state redirects), `cancelled` (task
    ///   cancellation, ``close()``, or a second call).
    func waitForCallback(timeout: Duration = defaultTimeout) async throws -> AuthorizationCallback {
        let deadline = ContinuousClock.now + timeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AuthorizationCallback, any Error>) in
                let start = lock.withLock { _ -> Bool in
                    guard phase == .bound else { return false }
                    phase = .serving
                    return true
                }
                guard start else {
                    continuation.resume(
                        throwing: AuthSessionError(
                            .cancelled, "The loopback listener is closed: it answers one sign-in, once."))
                    return
                }
                let started = DetachedThread.start(name: "tokenstore-loopback") { [self] in
                    let result = serve(deadline: deadline, timeout: timeout)
                    continuation.resume(with: result)
                }
                if !started {
                    closeDescriptors()
                    continuation.resume(
                        throwing: AuthSessionError(.loopbackUnavailable, "No thread could be started to serve the redirect."))
                }
            }
        } onCancel: {
            stop()
        }
    }

    /// Stops the listener: a wait in progress throws ``AuthSessionError/Code/cancelled``
    /// after the sockets are closed; a listener that never waited releases its port at once.
    func close() {
        lock.withLock { _ in
            stopRequested = true
            switch phase {
            case .serving: wakeLocked()
            case .bound: closeDescriptorsLocked()
            case .closed: break
            }
        }
    }

    // MARK: - Serving (on the listener's thread)

    private func serve(deadline: ContinuousClock.Instant, timeout: Duration) -> Result<AuthorizationCallback, any Error> {
        let (listener, wake, location) = lock.withLock { _ in (listenDescriptor, wakeRead, startLocation) }
        var start = location.map { LoopbackRequestRouter.Start.pending(location: $0) } ?? .none
        var connections: [LoopbackConnection] = []
        var refusedStates = 0
        var refusedPeers = 0
        // The outcome once decided, and the connection still receiving its page.
        var decided: (result: Result<AuthorizationCallback, AuthSessionError>, descriptor: Int32)?
        var result: Result<AuthorizationCallback, AuthSessionError>

        func drop(_ index: Int) {
            LoopbackSocket.wipe(&connections[index].input)
            LoopbackSocket.closeConnection(connections[index].descriptor)
            connections.remove(at: index)
        }

        serving: while true {
            if isStopRequested {
                result = .failure(AuthSessionError(.cancelled, "The sign-in was cancelled."))
                break
            }
            let now = ContinuousClock.now
            if let outcome = decided {
                if !connections.contains(where: { $0.descriptor == outcome.descriptor }) {
                    result = outcome.result
                    break
                }
            } else if now >= deadline {
                let peers = refusedPeers > 0 ? " \(refusedPeers) connections of other local users were refused." : ""
                if refusedStates > 0 {
                    result = .failure(
                        AuthSessionError(
                            .stateMismatch,
                            "No sign-in answer with the expected state arrived within \(AuthSessionError.format(timeout)); "
                                + "\(refusedStates) with a wrong or missing state were refused." + peers))
                } else {
                    result = .failure(
                        AuthSessionError(
                            .timedOut, "No sign-in answer arrived within \(AuthSessionError.format(timeout))." + peers))
                }
                break
            }
            // Connections past their own deadline go, whatever their state.
            var index = connections.count - 1
            while index >= 0 {
                if now >= connections[index].deadline {
                    if connections[index].descriptor == decided?.descriptor {
                        logger.debug("loopback answer page not taken in time")
                    }
                    drop(index)
                }
                index -= 1
            }
            if let outcome = decided, !connections.contains(where: { $0.descriptor == outcome.descriptor }) {
                result = outcome.result
                break
            }

            var descriptors = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let accepting = decided == nil && connections.count < limits.maximumConnections
            if accepting { descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            let firstConnection = descriptors.count
            for connection in connections {
                let interested = decided == nil || connection.descriptor == decided?.descriptor
                let events = connection.answering ? Int16(POLLOUT) : Int16(POLLIN)
                // A descriptor of -1 is skipped by poll(2): connections set aside once the answer is decided.
                descriptors.append(pollfd(fd: interested ? connection.descriptor : -1, events: events, revents: 0))
            }
            var wakeAt = decided == nil ? deadline : now + limits.writeTimeout
            for connection in connections { wakeAt = min(wakeAt, connection.deadline) }
            let ready = poll(&descriptors, nfds_t(descriptors.count), LoopbackSocket.milliseconds(until: wakeAt, from: now))
            if ready < 0 {
                if errno == EINTR { continue }
                result = .failure(
                    AuthSessionError(.loopbackUnavailable, "The loopback listener failed (poll: \(LoopbackSocket.errorName(errno)))."))
                break
            }
            if ready == 0 { continue }
            if descriptors[0].revents != 0 { LoopbackSocket.drain(wake) }
            if accepting, descriptors[1].revents != 0 {
                refusedPeers += acceptAll(listener, into: &connections)
            }

            // Walk the polled connections back to front so removals keep earlier indices valid.
            for position in (firstConnection..<descriptors.count).reversed() {
                let index = position - firstConnection
                let events = descriptors[position].revents
                guard events != 0, descriptors[position].fd >= 0 else { continue }
                if connections[index].answering {
                    if events & Int16(POLLOUT) != 0, LoopbackSocket.writeSome(&connections[index]) == false {
                        drop(index)  // done, or the peer went away
                    } else if events & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 && events & Int16(POLLOUT) == 0 {
                        drop(index)
                    }
                    continue
                }
                switch LoopbackSocket.readSome(&connections[index], limit: limits.maximumRequestBytes) {
                case .closed:
                    drop(index)
                    continue  // `index` names no connection any more
                case .pending:
                    // The first bytes arrived: the connection now has the read time-out.
                    if !connections[index].input.isEmpty && !connections[index].sentAny {
                        connections[index].sentAny = true
                        connections[index].deadline = connections[index].accepted + limits.readTimeout
                    }
                case .tooLarge:
                    logger.debug("loopback request refused: head too large")
                    answer(&connections[index], with: LoopbackRequestRouter.tooLargeResponse)
                case .head(let end):
                    let decision = router.route(head: connections[index].input[..<end], start: start)
                    answer(&connections[index], with: decision.response)
                    switch decision.outcome {
                    case .keepWaiting:
                        logger.debug("loopback request answered, still waiting")
                    case .servedStart:
                        if case .pending = start { logger.debug("loopback start page served") }
                        start = .used
                    case .refusedState:
                        refusedStates += 1
                        logger.info(
                            "loopback redirect refused: wrong or missing state; still waiting",
                            metadata: ["loopback.refused": "\(refusedStates)"])
                    case .finished(let outcome):
                        if decided == nil {
                            decided = (outcome, connections[index].descriptor)
                            logger.debug("loopback redirect received, closing once the page is sent")
                        }
                    }
                }
                // Try to send at once: most answers fit in the socket buffer.
                if connections[index].answering, LoopbackSocket.writeSome(&connections[index]) == false {
                    drop(index)
                }
            }
        }

        for index in connections.indices.reversed() { drop(index) }
        closeDescriptors()
        if refusedPeers > 0 {
            logger.warning(
                "loopback connections of other local users refused", metadata: ["loopback.refusedPeers": "\(refusedPeers)"])
        }
        logger.debug("loopback listener closed", metadata: ["loopback.port": "\(port)"])
        return result.mapError { $0 as any Error }
    }
}
