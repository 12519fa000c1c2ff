import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

#if canImport(Glibc)
import Glibc
#endif

/// The loopback listener against another local user (review N1, N2) and against requests
/// that are not the browser's: same-uid peers only, a one-time start page, `Host`, idle
/// connections. "Another local user" is a real process running as uid 65534 (`setpriv`), so
/// these tests need root and util-linux's setpriv; they are skipped, saying so, otherwise.
@Suite("Loopback listener against other local users", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LoopbackForeignPeerTests {
    typealias Support = SignInTestSupport

    static let state = "Fp4-state_0123456789abcdefghijklmnopqrstuvw"
    static let setpriv = "/usr/bin/setpriv"
    static let python = "/usr/bin/python3"
    static let canRunAsAnotherUser = getuid() == 0 && access(setpriv, X_OK) == 0 && access(python, X_OK) == 0

    /// The other local user's program: `callback PORT` sends a valid-looking callback (the
    /// state from $FOREIGN_STATE, as if read from argv) and prints how many bytes came back;
    /// `flood PORT SECONDS` keeps 300 connections open, reopening the ones closed.
    static let foreignScript = #"""
        import os, signal, socket, sys, time
        mode, port = sys.argv[1], int(sys.argv[2])
        if mode == "callback":
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            target = os.environ.get("FOREIGN_TARGET") or ("/callback?code=evil&state=" + os.environ["FOREIGN_STATE"])
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (target, port)).encode())
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk: break
                    got += chunk
            except OSError:
                pass
            print("received %d" % len(got), flush=True)
        else:
            end = time.monotonic() + float(sys.argv[3])
            held, opened = [], 0
            def report(*_):
                print("opened %d" % opened, flush=True); os._exit(0)
            signal.signal(signal.SIGTERM, report)
            while time.monotonic() < end:
                while len(held) < 300:
                    try:
                        c = socket.socket(); c.setblocking(False)
                        c.connect_ex(("127.0.0.1", port)); held.append(c); opened += 1
                    except OSError:
                        break
                time.sleep(0.05)
                alive = []
                for c in held:
                    try:
                        if c.recv(1, socket.MSG_DONTWAIT) == b"": c.close(); continue
                    except BlockingIOError:
                        pass
                    except OSError:
                        c.close(); continue
                    alive.append(c)
                held = alive
            report()
        """#

    static func foreignArguments(_ arguments: String...) -> [String] {
        ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", foreignScript] + arguments
    }

    @Test(
        "a callback with the right state from another uid is closed unread and does not end the sign-in",
        .enabled(if: canRunAsAnotherUser, "needs root and setpriv to run a process as uid 65534"))
    func foreignCallbackIsRefused() async throws {
        let sink = AuthorizationServerClientTests.LogSink()
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state, logger: sink.logger)
        let port = listener.port
        let start = listener.startURL(for: URL(string: "https://tenant.example/authorize?state=\(Self.state)")!)
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }
        var environment = ProcessInfo.processInfo.environment
        environment["FOREIGN_STATE"] = Self.state
        let callback = try await offPool { [environment] in
            try ChildProcess.run(Self.setpriv, Self.foreignArguments("callback", "\(port)"), environment: environment)
        }
        #expect(callback.termination.succeeded, "\(callback)")
        #expect(callback.standardOutputText == "received 0\n", "the other user got an answer: \(callback)")
        // The one-time start page is not theirs either, and stays usable.
        environment["FOREIGN_TARGET"] = start.path
        let foreignStart = try await offPool { [environment] in
            try ChildProcess.run(Self.setpriv, Self.foreignArguments("callback", "\(port)"), environment: environment)
        }
        #expect(foreignStart.standardOutputText == "received 0\n", "\(foreignStart)")
        #expect(try await Support.get(port: port, start.path).status == 302)

        // The wait went on: this user's redirect is the one that counts.
        #expect(try await Support.get(port: port, "/callback?code=mine&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "mine")
        #expect(sink.lines.joined(separator: "\n").contains("loopback.refusedPeers=2"), "\(sink.lines.joined(separator: "\n"))")
        #expect(!sink.lines.joined(separator: "\n").contains(Self.state))
    }

    @Test(
        "a flood of another uid's connections does not keep this user's redirect out",
        .enabled(if: canRunAsAnotherUser, "needs root and setpriv to run a process as uid 65534"))
    func foreignFloodDoesNotKeepTheRedirectOut() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }
        let flood = try ChildProcess.start(Self.setpriv, Self.foreignArguments("flood", "\(port)", "12"))
        defer { _ = flood.stop() }
        // Let the flood fill whatever it can (before the fix: the 16 slots and the backlog of 16).
        try await Task.sleep(for: .seconds(3))
        let began = ContinuousClock.now
        // A browser gives up on a connection after about 20 s; this one after 8.
        let answer = try await offPool { () -> Support.HTTPAnswer in
            let descriptor = try Support.connect(port: port, timeout: 8)
            defer { close(descriptor) }
            try Support.send(
                descriptor, Array("GET /callback?code=mine&state=\(Self.state) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8))
            return Support.HTTPAnswer(try Support.receiveAll(descriptor))
        }
        let elapsed = ContinuousClock.now - began
        #expect(answer.status == 200)
        #expect(try await waiting.value.code.stringValue() == "mine")
        _ = flood.stop()
        let opened = String(decoding: flood.captured("stdout"), as: UTF8.self).split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
        print("METRIC signin_redirect_under_foreign_flood_ms=\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000) foreign_connections_opened=\(opened)")
    }

    @Test("a connection that sends nothing is closed after the idle time-out (2 s), not the read time-out (10 s)")
    func idleConnectionsGoSoon() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }
        // A first request answered: the listener's thread is serving (on a loaded machine the
        // task that starts it may run late, and a connection counts from its accept).
        #expect(try await Support.get(port: port, "/favicon.ico").status == 404)
        let idle = try await offPool { () -> Duration in
            let descriptor = try Support.connect(port: port, timeout: 30)
            defer { close(descriptor) }
            let began = ContinuousClock.now
            _ = try Support.receiveAll(descriptor)
            return ContinuousClock.now - began
        }
        #expect(idle >= .milliseconds(1500) && idle < .seconds(6), "closed after \(idle)")
        print("METRIC signin_idle_connection_closed_ms=\(idle.components.seconds * 1000 + idle.components.attoseconds / 1_000_000_000_000_000)")
        #expect(try await Support.get(port: port, "/callback?code=ok&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "ok")
    }

    @Test("the start page redirects once, with no-store headers, to the authorization URL; then refuses")
    func startPageWorksOnce() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let authorization = URL(string: "https://tenant.example/authorize?state=\(Self.state)&nonce=n&code_challenge=c")!
        let start = listener.startURL(for: authorization)
        #expect(start.absoluteString.hasPrefix("http://127.0.0.1:\(port)/start/"))
        #expect(start.path.count == "/start/".count + 43)
        for secret in [Self.state, "nonce", "code_challenge"] { #expect(!start.absoluteString.contains(secret)) }
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }

        #expect(try await Support.get(port: port, "/start/" + String(repeating: "A", count: 43)).status == 404)
        let first = try await Support.get(port: port, start.path)
        #expect(first.status == 302)
        #expect(first.text.contains("\r\nLocation: \(authorization.absoluteString)\r\n"))
        #expect(first.text.contains("\r\nCache-Control: no-store\r\n"))
        #expect(first.text.contains("\r\nReferrer-Policy: no-referrer\r\n"))
        let second = try await Support.get(port: port, start.path)
        #expect(second.status == 410)
        #expect(!second.text.contains("Location:"))
        #expect(!second.text.contains(Self.state))

        #expect(try await Support.get(port: port, "/callback?code=ok&state=\(Self.state)").status == 200)
        #expect(try await waiting.value.code.stringValue() == "ok")
    }

    @Test("a callback with another Host (or none, or two) gets 400 and does not end the wait")
    func wrongHostIsRefused() async throws {
        let listener = try LoopbackRedirectListener(ports: [0], expectedState: Self.state)
        let port = listener.port
        let waiting = Task { try await listener.waitForCallback(timeout: .seconds(60)) }
        let target = "GET /callback?code=evil&state=\(Self.state) HTTP/1.1\r\n"
        for headers in [
            "Host: rebound.attacker.example:\(port)\r\n", "Host: 127.0.0.1\r\n", "Host: localhost:\(port)\r\n", "",
            "Host: 127.0.0.1:\(port)\r\nHost: evil.example\r\n", "Host: 127.0.0.1:\(port + 1)\r\n",
        ] {
            let answer = try await Support.exchange(port: port, target + headers + "\r\n")
            #expect(answer.status == 400, "\(headers.debugDescription): \(answer.status)")
        }
        // Case-insensitive field name, spaces around the value: still this listener's host.
        let good = try await Support.exchange(
            port: port, "GET /callback?code=mine&state=\(Self.state) HTTP/1.1\r\nhOsT:  127.0.0.1:\(port) \r\n\r\n")
        #expect(good.status == 200)
        #expect(try await waiting.value.code.stringValue() == "mine")
    }
}
