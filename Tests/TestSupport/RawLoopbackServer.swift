import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A tiny TCP server on `127.0.0.1` for transport tests: each connection is handed to
/// `handler` on a thread of its own, which reads and writes raw bytes (a hostile answer, a
/// recording "proxy"). Connections are counted and their request heads kept.
///
/// ```swift
/// let proxy = try RawLoopbackServer { connection in _ = connection.readHead() }
/// defer { proxy.stop() }
/// // … proxy.connections == 0
/// ```
public final class RawLoopbackServer: @unchecked Sendable {  // mutable state under `lock`
    /// One accepted connection.
    public struct Connection: Sendable {
        /// The socket.
        public let descriptor: Int32
        let server: RawLoopbackServer

        /// Reads until the end of a request head (`\r\n\r\n`), end of stream, 64 KiB or 5 s;
        /// the head is also recorded in ``RawLoopbackServer/heads``.
        @discardableResult
        public func readHead() -> String {
            var head: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while head.count < 64 * 1024 {
                let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                head.append(contentsOf: chunk[0..<count])
                if head.count >= 4, (0...(head.count - 4)).contains(where: { head[$0..<$0 + 4] == [13, 10, 13, 10] }) { break }
            }
            let text = String(decoding: head, as: UTF8.self)
            server.record(head: text)
            return text
        }

        /// Writes all of `bytes`; `false` when the peer went away.
        @discardableResult
        public func write(_ bytes: some Collection<UInt8>) -> Bool {
            let array = Array(bytes)
            var offset = 0
            while offset < array.count {
                let sent = array.withUnsafeBytes {
                    send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
                }
                if sent <= 0 { return false }
                offset += sent
                server.add(sent: sent)
            }
            return true
        }

        /// Writes `text` as UTF-8.
        @discardableResult
        public func write(_ text: String) -> Bool { write(Array(text.utf8)) }

        /// Waits (at most `timeout`) until the peer closes or sends more; `true` when it closed.
        public func waitForClose(timeout: Duration) -> Bool {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(timeout.components.seconds * 1000)
            guard poll(&entry, 1, milliseconds) == 1 else { return false }
            var byte: UInt8 = 0
            return recv(descriptor, &byte, 1, Int32(MSG_PEEK)) <= 0
        }
    }

    /// The bound port.
    public let port: UInt16
    /// `http://127.0.0.1:PORT`.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private let listenDescriptor: Int32
    private let handler: @Sendable (Connection) -> Void
    private let lock = NSLock()
    private var stopping = false
    private var acceptedCount = 0
    private var recordedHeads: [String] = []
    private var sentBytes = 0
    private let finished = DispatchSemaphore(value: 0)

    /// Connections accepted so far.
    public var connections: Int { lock.withLock { acceptedCount } }
    /// The request heads read by ``Connection/readHead()``.
    public var heads: [String] { lock.withLock { recordedHeads } }
    /// Bytes written by the handlers so far.
    public var bytesSent: Int { lock.withLock { sentBytes } }

    /// Binds `127.0.0.1` on a free port and starts accepting.
    public init(handler: @escaping @Sendable (Connection) -> Void) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw RawLoopbackServerError("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 64) == 0
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw RawLoopbackServerError("bind/listen: \(errno)")
        }
        port = UInt16(bigEndian: address.sin_port)
        listenDescriptor = descriptor
        self.handler = handler
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "raw-loopback-server"
        thread.start()
    }

    /// Stops accepting and closes the listening socket (handlers still running finish on their own).
    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopping = true }
            return !stopping
        }
        guard first else { return }
        finished.wait()
        close(listenDescriptor)
    }

    private func acceptLoop() {
        defer { finished.signal() }
        while !lock.withLock({ stopping }) {
            var entry = pollfd(fd: listenDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) == 1 else { continue }
            let client = accept(listenDescriptor, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            lock.withLock { acceptedCount += 1 }
            let connection = Connection(descriptor: client, server: self)
            let handler = self.handler
            let thread = Thread {
                handler(connection)
                close(client)
            }
            thread.start()
        }
    }

    fileprivate func record(head: String) { lock.withLock { recordedHeads.append(head) } }
    fileprivate func add(sent: Int) { lock.withLock { sentBytes += sent } }
}

/// A ``RawLoopbackServer`` could not start.
public struct RawLoopbackServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
