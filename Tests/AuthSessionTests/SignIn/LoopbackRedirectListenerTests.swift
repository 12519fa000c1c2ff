import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

#if canImport(Glibc)
import Glibc
#endif

/// The loopback redirect listener over real sockets on 127.0.0.1, driven by a raw HTTP client.
/// Each test binds its own listener (port 0 unless the test is about ports), so tests run in parallel.
@Suite("Loopback redirect listener", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LoopbackRedirectListenerTests {
    typealias Support = SignInTestSupport

    static let state = "Xq3-state_0123456789abcdefghijklmnopqrstuvw"

    @discardableResult
    static func expectCode(
        _ code: AuthSessionError.Code, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async -> AuthSessionError? {
        do {
            try await body()
            Issue.record("no error thrown, expected \(code)", sourceLocation: sourceLocation)
            return nil
        } catch {
            #expect((error as? AuthSessionError)?.code == code, "\(error)", sourceLocation: sourceLocation)
            return error as? AuthSessionError
        }
    }

    /// The port can be bound again by a new listener (SO_REUSEADDR, as the app's next attempt would).
    static func expectPortFree(_ port: UInt16, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let again = try LoopbackRedirectListener(ports: [port], expectedState: "s")
            #expect(again.port == port, sourceLocation: sourceLocation)
            again.close()
        } catch {
            Issue.record("port \(port) not released: \(error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Answers

    @Test func goodCallbackCompletesWithTheCodeAndReleasesThePort() async throws {
        let sink = AuthorizationServerClientTests.LogSink()
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state, logger: sink.logger)
        let port = listener.port
        #expect(port != 0)
        #expect(listener.redirectURI.absoluteString == "http://127.0.0.1:\(port)/callback")
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }

        let answer = try await Support.get(port: port, "/callback?code=the%2Dcode+1&state=\(Self.state)")
        #expect(answer.status == 200)
        #expect(answer.text.contains("You can close this window"))
        #expect(answer.text.contains("Connection: close"))
        let callback = try await waiting.value
        #expect(callback.code.stringValue() == "the-code 1")
        #expect(callback.redirectURI == listener.redirectURI)

        Self.expectPortFree(port)
        for line in sink.lines {
            #expect(!line.contains("the-code") && !line.contains(Self.state), "request data reached the log: \(line)")
        }
    }

    @Test func wrongStateIsRefusedAndTheWaitGoesOn() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }

        let forged = try await Support.get(port: port, "/callback?code=forged&state=not-the-state")
        #expect(forged.status == 400)
        #expect(forged.text.contains("state mismatch"))
        // No state at all, and a forged error without the state: refused too, not an end.
        let missing = try await Support.get(port: port, "/callback?code=forged")
        #expect(missing.status == 400)
        let forgedError = try await Support.get(port: port, "/callback?error=access_denied")
        #expect(forgedError.status == 400)
        // A prefix of the right state is not the right state.
        let prefix = try await Support.get(port: port, "/callback?code=forged&state=\(Self.state.dropLast())")
        #expect(prefix.status == 400)

        let good = try await Support.get(port: port, "/callback?state=\(Self.state)&code=real")
        #expect(good.status == 200)
        #expect(try await waiting.value.code.stringValue() == "real")
    }

    @Test func onlyWrongStatesUntilTheTimeOutIsAStateMismatch() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(2)) }
        let forged = try await Support.get(port: port, "/callback?code=x&state=stale-tab")
        #expect(forged.status == 400)
        let error = await Self.expectCode(.stateMismatch) { _ = try await waiting.value }
        #expect(error?.description.contains("stale-tab") == false)
        Self.expectPortFree(port)
    }

    @Test func serverErrorEndsTheSignInWithATypedError() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }
        let answer = try await Support.get(
            port: listener.port,
            "/callback?error=access_denied&error_description=User%20did%20not%20authorize&state=\(Self.state)")
        #expect(answer.status == 200)
        #expect(answer.text.contains("not completed"))
        #expect(!answer.text.contains("User did not"), "server text is never echoed into the page")
        let error = await Self.expectCode(.authorizationFailed) { _ = try await waiting.value }
        #expect(error?.oauthError == "access_denied")
        #expect(error?.oauthErrorDescription == "User did not authorize")
        Self.expectPortFree(listener.port)
    }

    @Test func strayRequestsGet404AndTheRealCallbackStillCompletes() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }

        #expect(try await Support.get(port: port, "/favicon.ico").status == 404)
        #expect(try await Support.get(port: port, "/").status == 404)
        #expect(try await Support.get(port: port, "/callback/extra?code=x&state=\(Self.state)").status == 404)
        let post = try await Support.exchange(
            port: port,
            "POST /callback?code=x&state=\(Self.state) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        #expect(post.status == 404)
        let garbage = try await Support.exchange(port: port, "NOT HTTP\r\n\r\n")
        #expect(garbage.status == 400)
        let duplicated = try await Support.get(port: port, "/callback?code=a&code=b&state=\(Self.state)")
        #expect(duplicated.status == 400, "a repeated parameter is refused")
        let oversized = try await Support.get(port: port, "/callback?pad=" + String(repeating: "a", count: 9000))
        #expect(oversized.status == 431)

        #expect(try await Support.get(port: port, "/callback?code=ok&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "ok")
    }

    /// A client that connects and hangs up without a request (a port probe) is dropped, and
    /// the listener goes on: it once indexed the dropped connection and trapped.
    @Test func clientsThatHangUpWithoutARequestAreDroppedAndTheCallbackStillCompletes() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }
        for _ in 0..<5 {
            let probe = try Support.connect(port: port)
            close(probe)
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await Support.get(port: port, "/callback?code=after-probes&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "after-probes")
    }

    @Test func aSlowClientDoesNotBlockTheCallbackAndIsDroppedAfterItsReadTimeOut() async throws {
        var limits = LoopbackRedirectListener.Limits()
        limits.readTimeout = .seconds(1)
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state, limits: limits)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }

        // A client that sends half a request line and stalls.
        let slow = try Support.connect(port: port)
        defer { close(slow) }
        try Support.send(slow, Array("GET /callback?co".utf8))
        let dropped = Task {
            try await offPool { () -> (bytes: Int, seconds: Double) in
                let start = ContinuousClock.now
                let bytes = try Support.receiveAll(slow)  // ends when the listener drops the connection
                let (seconds, atto) = (ContinuousClock.now - start).components
                return (bytes.count, Double(seconds) + Double(atto) / 1e18)
            }
        }
        let outcome = try await dropped.value
        // Measured on a thread of its own; the bound only tells "dropped at its read time-out"
        // from "held until the listener's 30 s time-out", with room for a loaded machine.
        #expect(outcome.bytes == 0 && outcome.seconds < 25, "slow client dropped after its read time-out: \(outcome)")

        #expect(try await Support.get(port: port, "/callback?code=fast&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "fast")
    }

    @Test func manyIdleConnectionsDoNotHoldTheCallback() async throws {
        var limits = LoopbackRedirectListener.Limits()
        limits.maximumConnections = 4
        limits.readTimeout = .seconds(2)
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state, limits: limits)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(30)) }
        // More idle connections than the listener serves at once (a browser's preconnects, or an attacker).
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<6 { idle.append(try Support.connect(port: port)) }
        // The callback can only be accepted once idle connections were dropped at their read
        // time-out (6 idle, 4 served at once); were they held, the wait would end `timedOut`.
        // No wall-clock bound: on a loaded machine the waiting task itself may start late.
        #expect(try await Support.get(port: port, "/callback?code=late&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "late")
    }

    // MARK: - Ports

    @Test func aPortInUseMovesOnToTheNext() async throws {
        let blocker = try Support.occupy()
        defer { close(blocker.descriptor) }
        let next = try Support.freePort()
        let listener = try LoopbackRedirectListener(ports: [blocker.port, next], expectedState: Self.state)
        #expect(listener.port == next)
        #expect(listener.redirectURI.absoluteString == "http://127.0.0.1:\(next)/callback")
        listener.close()
        Self.expectPortFree(next)

        let second = try Support.occupy()
        defer { close(second.descriptor) }
        let error = await Self.expectCode(.loopbackUnavailable) {
            _ = try LoopbackRedirectListener(ports: [blocker.port, second.port], expectedState: Self.state)
        }
        #expect(error?.message.contains("in use") == true)
    }

    @Test func timeOutClosesAtOnceAndReleasesThePort() async throws {
        let fixed = try Support.freePort()
        // The idle client's read time-out is 10 minutes, so a close that waited for it would
        // take that long; the bound below leaves room for a loaded machine (a starved test
        // thread resumed 40 s late once) without confusing the two.
        var limits = LoopbackRedirectListener.Limits()
        limits.readTimeout = .seconds(600)
        let listener = try LoopbackRedirectListener(ports: [fixed], expectedState: Self.state, limits: limits)
        #expect(listener.port == fixed)
        // An idle client connected during the time-out must not keep the port.
        let idle = try Support.connect(port: fixed)
        defer { close(idle) }
        let start = ContinuousClock.now
        await Self.expectCode(.timedOut) { _ = try await listener.waitForCallback(timeout: .milliseconds(500)) }
        #expect(ContinuousClock.now - start < .seconds(300), "closed at the time-out, not at the idle client's read time-out")
        Self.expectPortFree(fixed)
        // The listener answers once: a second wait is refused.
        await Self.expectCode(.cancelled) { _ = try await listener.waitForCallback(timeout: .seconds(1)) }
    }

    @Test func cancellationClosesAtOnceAndReleasesThePort() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(120)) }
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        waiting.cancel()
        await Self.expectCode(.cancelled) { _ = try await waiting.value }
        // The bound tells "at the cancellation" from "at the 120 s time-out", with room for a
        // loaded machine whose cooperative pool is busy.
        #expect(ContinuousClock.now - start < .seconds(60), "closed at the cancellation, not at the 120 s time-out")
        Self.expectPortFree(port)
    }

    @Test func cancelledBeforeWaitingAndClosedListenersReleaseThePort() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await listener.waitForCallback(timeout: .seconds(120))
        }
        await Self.expectCode(.cancelled) { _ = try await waiting.value }
        Self.expectPortFree(listener.port)

        let closed = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        closed.close()
        Self.expectPortFree(closed.port)
        await Self.expectCode(.cancelled) { _ = try await closed.waitForCallback(timeout: .seconds(1)) }
    }

    /// Another thread spawning programs copies the listening socket into each child until its
    /// exec; the port must still be free the moment the listener is closed.
    @Test func thePortIsFreeAtOnceEvenWhileAnotherThreadSpawnsPrograms() async throws {
        let spawning = SpawnLoop()
        let spawner = Thread { spawning.run() }
        spawner.start()
        defer { spawning.stop() }
        for round in 0..<40 {
            let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
            if round % 2 == 0 {
                listener.close()
            } else {
                await Self.expectCode(.timedOut) { _ = try await listener.waitForCallback(timeout: .milliseconds(5)) }
            }
            Self.expectPortFree(listener.port)
        }
        #expect(spawning.count > 0, "programs were spawned meanwhile")
    }

    /// Runs `/bin/true` through ChildProcess in a loop until stopped.
    final class SpawnLoop: @unchecked Sendable {  // `stopped` and `spawned` under `lock`
        private let lock = NSLock()
        private var stopped = false
        private var spawned = 0
        var count: Int { lock.withLock { spawned } }
        func stop() { lock.withLock { stopped = true } }
        func run() {
            while !lock.withLock({ stopped }) {
                _ = try? ChildProcess.run("/bin/true", [], timeout: .seconds(10), dieWithParent: false)
                lock.withLock { spawned += 1 }
            }
        }
    }

    // MARK: - Two at once

    @Test func twoListenersAtOnceEachGetTheirOwnAnswer() async throws {
        let first = try LoopbackRedirectListener(ports: [0], expectedState: "state-one")
        let second = try LoopbackRedirectListener(ports: [0], expectedState: "state-two")
        #expect(first.port != second.port)
        async let one = first.waitForCallback(timeout: .seconds(30))
        async let two = second.waitForCallback(timeout: .seconds(30))

        // Each listener refuses the other's state.
        #expect(try await Support.get(port: first.port, "/callback?code=c2&state=state-two").status == 400)
        async let answerTwo = Support.get(port: second.port, "/callback?code=c2&state=state-two")
        async let answerOne = Support.get(port: first.port, "/callback?code=c1&state=state-one")
        #expect(try await answerOne.status == 200)
        #expect(try await answerTwo.status == 200)
        #expect(try await one.code.stringValue() == "c1")
        #expect(try await two.code.stringValue() == "c2")
    }

    // MARK: - Parsing

    @Test func queryParsing() throws {
        let parsed = try #require(LoopbackRequestRouter.parameters(of: Array("a=1&b=x%20y+z&c=&d#frag".utf8)[...]))
        #expect(parsed["a"] == Array("1".utf8))
        #expect(parsed["b"] == Array("x y z".utf8))
        #expect(parsed["c"] == [])
        #expect(parsed["d"] == [])
        #expect(LoopbackRequestRouter.parameters(of: Array("a=%zz".utf8)[...]) == nil)
        #expect(LoopbackRequestRouter.parameters(of: Array("a=%2".utf8)[...]) == nil)
        #expect(LoopbackRequestRouter.parameters(of: Array("a=1&a=2".utf8)[...]) == nil)
        #expect(LoopbackRequestRouter.requestLine(of: Array("GET /x HTTP/1.1\r\n\r\n".utf8)[...]) != nil)
        #expect(LoopbackRequestRouter.requestLine(of: Array("GET http://h/x HTTP/1.1\r\n\r\n".utf8)[...]) == nil)
        #expect(LoopbackRequestRouter.requestLine(of: Array("GET /x HTTP/2\r\n\r\n".utf8)[...]) == nil)
    }
}
