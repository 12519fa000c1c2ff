import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Ports for the loopback redirect listeners of sign-in tests.
public enum LoopbackPorts {
    public struct Exhausted: Error, CustomStringConvertible {
        public var description: String { "no free loopback port found in 20000..<30000" }
    }

    /// Distinct ports on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral
    /// range (32768–60999 by default): a port bind(0) handed out and we closed again can be taken
    /// by any outgoing connection of the loaded test run before the listener binds it.
    public static func free(_ count: Int) throws -> [UInt16] {
        var ports: [UInt16] = []
        for _ in 0..<1000 where ports.count < count {
            let candidate = UInt16.random(in: 20_000..<30_000)
            if !ports.contains(candidate), isBindable(candidate) { ports.append(candidate) }
        }
        guard ports.count == count else { throw Exhausted() }
        return ports
    }

    /// Whether a listener could bind 127.0.0.1:`port` now (with SO_REUSEADDR, as the listener does).
    public static func isBindable(_ port: UInt16) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 }
        }
    }
}
