internal import CGlibcExtensions
import FoundationEssentials
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

extension LoopbackRedirectListener {
    /// Bounds on what one connection may cost.
    struct Limits: Sendable {
        /// The longest time a connection may take to deliver its whole request head.
        var readTimeout: Duration = .seconds(10)
        /// The longest time a connection may stay without sending a byte (a local flood of
        /// idle connections, or a browser's unused preconnection).
        var idleTimeout: Duration = .seconds(2)
        /// The longest time a connection may take to accept its answer.
        var writeTimeout: Duration = .seconds(2)
        /// The largest request head accepted (request line and header fields).
        var maximumRequestBytes = 8 * 1024
        /// The most connections served at once; more wait in the kernel's backlog.
        var maximumConnections = 16
    }

    // MARK: - Connections (on the listener's thread)

    func answer(_ connection: inout LoopbackConnection, with response: [UInt8]) {
        connection.output = response
        connection.written = 0
        connection.answering = true
        connection.deadline = ContinuousClock.now + limits.writeTimeout
        // The head is no longer needed: drop it (it held the code).
        LoopbackSocket.wipe(&connection.input)
    }

    /// Accepts what is pending, up to the free slots; closes every connection that is not of
    /// this user (before reading a byte: it takes no slot) and returns how many it closed.
    func acceptAll(_ listener: Int32, into connections: inout [LoopbackConnection]) -> Int {
        var refused = 0
        // A bound on one round, so a flood cannot keep the loop from serving the others.
        var round = 0
        while connections.count < limits.maximumConnections && round < 256 {
            round += 1
            let descriptor = tokenstore_accept_cloexec_nonblock(listener)
            if descriptor < 0 {
                // EAGAIN: no more pending; ECONNABORTED, EMFILE and the like: try again at the next poll.
                if errno == EINTR { continue }
                break
            }
            guard LoopbackPeer.verdict(for: descriptor) == .sameUser else {
                refused += 1
                Glibc.close(descriptor)
                continue
            }
            let now = ContinuousClock.now
            connections.append(LoopbackConnection(descriptor: descriptor, accepted: now, deadline: now + limits.idleTimeout))
        }
        return refused
    }
}
