import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay in front of a ``SoftwareTPM`` that records every byte both ways: what a sniffer
/// on a discrete TPM's LPC/SPI bus sees. It listens on two loopback ports in a row (the TPM's
/// command port and its control port, as swtpm has them) and forwards each connection to the
/// TPM's matching port; ``tcti`` reaches the TPM through it.
///
/// ```swift
/// let relay = try TPMRelay(to: tpm)
/// let provider = TPMKeyProvider(tcti: relay.tcti)
/// … relay.exchanges  // [(command, response)] of the command port, in order
/// ```
public final class TPMRelay: @unchecked Sendable {  // mutable state behind `lock`
    /// One TPM command and the TPM's answer, as they crossed the relay.
    public struct Exchange: Sendable {
        public let command: [UInt8]
        public let response: [UInt8]
        /// The command code (bytes 6..<10 of the command).
        public var commandCode: UInt32 { TPMRelay.uint32(command, at: 6) ?? 0 }
        /// The response code (bytes 6..<10 of the answer).
        public var responseCode: UInt32 { TPMRelay.uint32(response, at: 6) ?? 0 }
    }

    /// The TCTI configuration reaching the TPM through the relay.
    public let tcti: String
    private let listeners: [Int32]
    private let lock = NSLock()
    private var streams: [(toTPM: [UInt8], fromTPM: [UInt8])] = []
    private var everything: [UInt8] = []
    private var stopped = false

    /// Starts relaying to `tpm` (its command port and control port).
    public init(to tpm: SoftwareTPM) throws {
        var bound: [Int32] = []
        var chosen: UInt16 = 0
        for _ in 0..<20 {
            let port = try LoopbackPorts.free(1)[0]
            guard port < UInt16.max, let first = Self.listen(port) else { continue }
            guard let second = Self.listen(port + 1) else {
                close(first)
                continue
            }
            bound = [first, second]
            chosen = port
            break
        }
        guard bound.count == 2 else { throw SoftwareTPM.Unavailable(description: "no two free loopback ports for the relay") }
        listeners = bound
        tcti = "swtpm:host=127.0.0.1,port=\(chosen)"
        for (index, listener) in bound.enumerated() {
            let upstream = tpm.port + UInt16(index)
            let recorded = index == 0
            Thread.detachNewThread { [self] in acceptLoop(listener, upstream: upstream, recorded: recorded) }
        }
    }

    deinit { stop() }

    /// Stops accepting (connections in flight end with their peers).
    public func stop() {
        lock.lock()
        let wasStopped = stopped
        stopped = true
        lock.unlock()
        guard !wasStopped else { return }
        for listener in listeners { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }
    }

    /// Every byte that crossed the relay, both ports, both ways, in the order read.
    public var recordedBytes: [UInt8] { lock.withLock { everything } }

    /// The commands and answers of the command port, connection by connection, in order.
    public var exchanges: [Exchange] {
        lock.withLock { streams }.flatMap { stream in
            zip(Self.messages(stream.toTPM), Self.messages(stream.fromTPM)).map { Exchange(command: $0, response: $1) }
        }
    }

    /// The transient objects (handles 0x80…) the TPM holds after the exchanges so far, as they
    /// show on the wire: made by a successful TPM2_CreatePrimary, TPM2_Load, TPM2_ContextLoad,
    /// TPM2_LoadExternal or TPM2_CreateLoaded (the handle opening the answer), gone by a
    /// successful TPM2_FlushContext (the handle its command carries). An object a TPM restart
    /// took is not seen going.
    public var transientObjectsLeft: Set<UInt32> {
        var held = Set<UInt32>()
        for exchange in exchanges where exchange.responseCode == 0 {
            switch exchange.commandCode {
            case 0x131, 0x157, 0x161, 0x167, 0x191:
                if let handle = Self.uint32(exchange.response, at: 10), handle >> 24 == 0x80 { held.insert(handle) }
            case 0x165:
                if let handle = Self.uint32(exchange.command, at: 10) { held.remove(handle) }
            default:
                break
            }
        }
        return held
    }

    /// Splits a stream of TPM commands or answers at their size fields (bytes 2..<6).
    static func messages(_ bytes: [UInt8]) -> [[UInt8]] {
        var found: [[UInt8]] = []
        var offset = 0
        while let size = uint32(bytes, at: offset + 2), size >= 10, offset + Int(size) <= bytes.count {
            found.append(Array(bytes[offset..<offset + Int(size)]))
            offset += Int(size)
        }
        return found
    }

    /// A big-endian UInt32 at `offset`, nil past the end.
    public static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32? {
        guard offset >= 0, offset + 4 <= bytes.count else { return nil }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The first authorization session of a command with `handles` handles: its handle and
    /// attributes byte (TPM 2.0 Part 1 §18: handles, authorizationSize, then per session its
    /// handle, nonce (TPM2B), attributes, hmac (TPM2B)); nil when the command has no sessions.
    public static func firstSession(of command: [UInt8], handles: Int) -> (handle: UInt32, attributes: UInt8)? {
        guard uint32(command, at: 0).map({ $0 >> 16 }) == 0x8002 else { return nil }  // TPM_ST_SESSIONS
        let start = 10 + 4 * handles + 4
        guard let handle = uint32(command, at: start), start + 6 <= command.count else { return nil }
        let nonceSize = Int(command[start + 4]) << 8 | Int(command[start + 5])
        let attributes = start + 6 + nonceSize
        guard attributes < command.count else { return nil }
        return (handle, command[attributes])
    }

    // MARK: - Relaying

    private static func listen(_ port: UInt16) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = loopback(port)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 }
        }
        guard ok, Glibc.listen(descriptor, 16) == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func connectTo(_ port: UInt16) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = loopback(port)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) == 0 }
        }
        guard ok else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    private func acceptLoop(_ listener: Int32, upstream: UInt16, recorded: Bool) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return  // the listener was closed (stop)
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard let server = Self.connectTo(upstream) else {
                close(client)
                continue
            }
            let index: Int? = recorded ? lock.withLock { streams.append(([], [])); return streams.count - 1 } : nil
            let done = DispatchGroup()
            for (from, to, towardTPM) in [(client, server, true), (server, client, false)] {
                done.enter()
                Thread.detachNewThread { [self] in
                    pump(from: from, to: to) { bytes in
                        lock.withLock {
                            everything += bytes
                            if let index {
                                if towardTPM { streams[index].toTPM += bytes } else { streams[index].fromTPM += bytes }
                            }
                        }
                    }
                    done.leave()
                }
            }
            Thread.detachNewThread {
                done.wait()
                close(client)
                close(server)
            }
        }
    }

    /// Copies `from` to `to` until either side ends, recording each read first.
    private func pump(from: Int32, to: Int32, record: ([UInt8]) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            let bytes = Array(buffer[0..<count])
            record(bytes)
            var sent = 0
            while sent < count {
                let written = bytes.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { break }
                sent += written
            }
            guard sent == count else { break }
        }
        shutdown(to, Int32(SHUT_WR))
        shutdown(from, Int32(SHUT_RD))
    }
}
