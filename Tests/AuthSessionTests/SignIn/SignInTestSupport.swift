import AuthSession
import Foundation
import TestSupport
import Testing
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// Blocking helpers of the sign-in tests, run off the cooperative pool.
enum SignInTestSupport {
    struct SocketError: Error, CustomStringConvertible {
        let call: String
        let number: Int32
        var description: String { "\(call): \(String(cString: strerror(number)))" }
    }

    /// A blocking TCP connection to `127.0.0.1:port` with send and receive time-outs.
    ///
    /// The default is long on purpose: in the whole suite on 2 cores, the cooperative pool can
    /// be held for a minute by other tests' blocking work, and the task that starts the
    /// listener's serving thread waits for it (the request sits in the kernel's backlog
    /// meanwhile). Tests assert what is answered, not how fast.
    static func connect(port: UInt16, timeout: Int = 300) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(call: "socket", number: errno) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let number = errno
            close(descriptor)
            throw SocketError(call: "connect", number: number)
        }
        return descriptor
    }

    static func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw SocketError(call: "send", number: errno) }
            sent += count
        }
    }

    /// Reads until the peer closes (or the receive time-out).
    static func receiveAll(_ descriptor: Int32) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                bytes.append(contentsOf: chunk[0..<count])
                continue
            }
            if count == 0 { return bytes }
            if errno == EINTR { continue }
            throw SocketError(call: "recv", number: errno)
        }
    }

    /// One HTTP exchange of raw bytes; the whole answer (the listener closes after it).
    static func exchange(port: UInt16, _ request: String) async throws -> HTTPAnswer {
        try await offPool {
            let descriptor = try connect(port: port)
            defer { close(descriptor) }
            try send(descriptor, Array(request.utf8))
            return HTTPAnswer(try receiveAll(descriptor))
        }
    }

    /// `GET target` with the headers a browser sends.
    static func get(port: UInt16, _ target: String) async throws -> HTTPAnswer {
        try await exchange(
            port: port,
            "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUser-Agent: test\r\nAccept: text/html\r\n\r\n")
    }

    struct HTTPAnswer: Sendable {
        let status: Int
        let text: String
        init(_ bytes: [UInt8]) {
            text = String(decoding: bytes, as: UTF8.self)
            let parts = text.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? -1 : -1
        }
    }

    static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// A socket listening on `127.0.0.1:port` (`0`: any free port), and the port. Close it to free the port.
    static func occupy(port: UInt16 = 0) throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(call: "socket", number: errno) }
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 4) == 0 else {
            let number = errno
            close(descriptor)
            throw SocketError(call: "bind/listen", number: number)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, UInt16(bigEndian: actual.sin_port))
    }

    /// A port that was free a moment ago.
    static func freePort() throws -> UInt16 {
        let (descriptor, port) = try occupy()
        close(descriptor)
        return port
    }
}

/// Fetches the one-time start address itself (as the browser would), records the `Location`
/// of its `302` (the authorization URL), lets `transform` change it, and hands it to `next`.
/// In the background, as a browser does: the listener serves only once `open` returned.
struct StartFollowingOpener: BrowserOpener {
    let next: any BrowserOpener
    let location: URLBox
    var transform: @Sendable (URL) -> URL = { $0 }

    func open(_ url: URL) async throws {
        Task { [next, location, transform] in
            let answer = try await SignInTestSupport.get(port: UInt16(url.port!), url.path)
            guard answer.status == 302,
                let line = answer.text.split(separator: "\r\n").first(where: { $0.hasPrefix("Location: ") }),
                let target = URL(string: String(line.dropFirst("Location: ".count)))
            else {
                Issue.record("the start page answered \(answer.status)")
                return
            }
            location.set(target)
            try await next.open(transform(target))
        }
    }
}
