internal import CGlibcExtensions
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a connection the loopback listener accepted.
///
/// The listener serves only its own user: another local user must not be able to deliver a
/// redirect (a code of their own account, or an `error=` with text of their choosing), fetch
/// the one-time start page, or take one of the listener's slots. The owner
/// of the peer's socket comes from the kernel's socket table (`NETLINK_SOCK_DIAG`, an exact
/// lookup of the 4-tuple, as `ss -e` shows it), before a byte is read. Anything that cannot
/// be established is refused: fail closed.
enum LoopbackPeer {
    /// The verdict on one accepted connection.
    enum Verdict: Equatable {
        /// The peer's socket belongs to this process's effective uid.
        case sameUser
        /// The peer's socket belongs to another uid.
        case otherUser
        /// The owner could not be found (a peer already gone, no socket diagnostics): refused.
        case unknown(errno: Int32)
    }

    /// Checks the peer of the accepted IPv4 socket `descriptor` against `geteuid()`.
    static func verdict(for descriptor: Int32) -> Verdict {
        var local = sockaddr_in()
        var remote = sockaddr_in()
        var localLength = socklen_t(MemoryLayout<sockaddr_in>.size)
        var remoteLength = localLength
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &localLength) }
        }
        guard named == 0 else { return .unknown(errno: errno) }
        let peered = withUnsafeMutablePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &remoteLength) }
        }
        guard peered == 0 else { return .unknown(errno: errno) }
        guard local.sin_family == sa_family_t(AF_INET), remote.sin_family == sa_family_t(AF_INET) else {
            return .unknown(errno: EAFNOSUPPORT)
        }
        // The peer's own socket: its local end is our remote end, and the other way round.
        var owner: UInt32 = 0
        let found = tokenstore_tcp4_socket_owner(
            remote.sin_addr.s_addr, remote.sin_port, local.sin_addr.s_addr, local.sin_port, &owner)
        guard found == 0 else { return .unknown(errno: errno) }
        return owner == geteuid() ? .sameUser : .otherUser
    }
}
