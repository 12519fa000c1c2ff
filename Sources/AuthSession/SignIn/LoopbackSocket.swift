internal import CGlibcExtensions
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// One connection accepted by a ``LoopbackRedirectListener``.
struct LoopbackConnection {
    let descriptor: Int32
    /// When it was accepted: its idle and read time-outs count from then.
    let accepted: ContinuousClock.Instant
    var input: [UInt8] = []
    var output: [UInt8] = []
    var written = 0
    var deadline: ContinuousClock.Instant
    /// True once its first bytes arrived (its deadline is then the read time-out's).
    var sentAny = false
    /// True once the head is read and the answer is queued.
    var answering = false
}

/// The POSIX socket calls of the loopback listener: binding `127.0.0.1`, non-blocking reads
/// and writes of one connection, and closing it gracefully.
enum LoopbackSocket {

    enum ReadState {
        case pending, closed, tooLarge
        case head(end: Int)
    }

    static func readSome(_ connection: inout LoopbackConnection, limit: Int) -> ReadState {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let room = min(chunk.count, limit + 1 - connection.input.count)
            let count = chunk.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, room, 0) }
            if count > 0 {
                connection.input.append(contentsOf: chunk[0..<count])
                if let end = LoopbackRequestRouter.endOfHead(in: connection.input) { return .head(end: end) }
                if connection.input.count > limit { return .tooLarge }
                continue
            }
            if count == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .pending
            default: return .closed
            }
        }
    }

    /// Sends what it can; `false` when the connection is finished (all sent, or the peer is gone).
    static func writeSome(_ connection: inout LoopbackConnection) -> Bool {
        while connection.written < connection.output.count {
            let count = connection.output.withUnsafeBytes { bytes in
                send(
                    connection.descriptor, bytes.baseAddress! + connection.written,
                    bytes.count - connection.written, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                connection.written += count
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return true }
            return false
        }
        return false
    }

    /// Half-closes, discards unread input (so the close is a FIN, not a reset that could hide
    /// the page), and closes.
    static func closeConnection(_ descriptor: Int32) {
        shutdown(descriptor, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 1024)
        for _ in 0..<16 {
            let count = scratch.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count <= 0 { break }
        }
        Glibc.close(descriptor)
    }

    static func drain(_ descriptor: Int32) {
        var scratch = [UInt8](repeating: 0, count: 64)
        while scratch.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }

    static func milliseconds(until instant: ContinuousClock.Instant, from now: ContinuousClock.Instant) -> Int32 {
        guard instant > now else { return 0 }
        return Int32(clamping: (instant - now).roundedUpMilliseconds)
    }

    enum BindResult {
        case bound(descriptor: Int32, port: UInt16)
        case inUse
        case failed(call: String, errno: Int32)
    }

    /// A listening, non-blocking, close-on-exec TCP socket on `127.0.0.1:port`.
    static func bindLoopback(port: UInt16) -> BindResult {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | socketFlags, 0)
        guard descriptor >= 0 else { return .failed(call: "socket", errno: errno) }
        // SO_REUSEADDR (not SO_REUSEPORT): rebinding over our own TIME_WAIT connections works,
        // binding a port another socket listens on still fails with EADDRINUSE.
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // SOMAXCONN: a burst of connections waits in the kernel rather than being refused.
        if bound != 0 || listen(descriptor, SOMAXCONN) != 0 {
            let number = errno
            Glibc.close(descriptor)
            return number == EADDRINUSE ? .inUse : .failed(call: bound != 0 ? "bind" : "listen", errno: number)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            let number = errno
            Glibc.close(descriptor)
            return .failed(call: "getsockname", errno: number)
        }
        return .bound(descriptor: descriptor, port: UInt16(bigEndian: actual.sin_port))
    }

    /// Non-blocking and close-on-exec, set atomically at creation.
    static let socketFlags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

    static func errorName(_ number: Int32) -> String {
        "\(String(cString: strerror(number))), errno \(number)"
    }

    /// Zeroes `bytes` (a request head holds the code) and empties it.
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices { buffer[index] = 0 }
        }
        bytes = []
    }
}
