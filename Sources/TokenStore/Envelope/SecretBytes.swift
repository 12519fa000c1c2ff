internal import CSodium
import FoundationEssentials

/// Secret bytes (a token, a key, a user id) held in guarded memory that is wiped when the
/// value goes away.
///
/// The bytes live in guarded memory (`sodium_malloc` memory, locked, out
/// of core dumps, wiped on free).
/// `description` and `debugDescription` show only the length and a short fingerprint, so a
/// stray `print` or log line never reveals the secret. Equality is constant-time.
///
/// Converting to a `String` is explicit (``stringValue()``): do it only at the edge where
/// the secret is handed to something that needs it, such as an HTTP request body.
public final class SecretBytes: Sendable, Equatable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    // `nonisolated(unsafe)`: written once in init, read-only afterwards, freed in deinit.
    private nonisolated(unsafe) let pointer: UnsafeMutableRawPointer?
    /// The number of bytes.
    public let count: Int
    /// The secret whose memory these bytes are part of (``init(sharing:offset:count:)``), which
    /// frees it; `nil` when this value owns its memory.
    private let owner: SecretBytes?

    /// Copies `bytes` into guarded memory.
    public init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        Sodium.ensureInitialized()
        owner = nil
        count = bytes.count
        guard count > 0 else {
            pointer = nil
            return
        }
        let memory = GuardedMemory.allocate(count)
        let buffer = UnsafeMutableRawBufferPointer(start: memory, count: count)
        buffer.copyBytes(from: bytes)
        pointer = memory
    }

    /// Copies the UTF-8 bytes of `string` into guarded memory.
    public convenience init(utf8 string: String) {
        self.init(Array(string.utf8))
    }

    /// Allocates `count` bytes and lets `fill` write them (used for keys made by libsodium).
    init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        Sodium.ensureInitialized()
        owner = nil
        self.count = count
        guard count > 0 else {
            fill(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            pointer = nil
            return
        }
        let memory = GuardedMemory.allocate(count)
        fill(UnsafeMutableRawBufferPointer(start: memory, count: count))
        pointer = memory
    }

    /// Random bytes from libsodium's CSPRNG.
    static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
    }

    /// `count` bytes at `offset` of `owner`, without a copy: they stay in `owner`'s guarded
    /// memory, which lives (and is wiped) with the last of the two (a decoded record's secret
    /// inside its decrypted plaintext).
    init(sharing owner: SecretBytes, offset: Int, count: Int) {
        precondition(offset >= 0 && count >= 0 && offset + count <= owner.count)
        self.owner = owner
        self.count = count
        pointer = count == 0 ? nil : owner.pointer.map { $0 + offset }
    }

    deinit {
        if owner == nil, let pointer { GuardedMemory.release(pointer, count: count) }
    }

    /// Lends the bytes for the duration of `body`. Do not let them escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The secret as UTF-8 text, or `nil` if it is not valid UTF-8.
    ///
    /// - Warning: the returned `String` is ordinary memory that is not wiped. Call this
    ///   only at the edge where the secret must be handed on.
    public func stringValue() -> String? {
        withUnsafeBytes { String(validating: $0.bindMemory(to: UInt8.self), as: UTF8.self) }
    }

    /// A copy of the bytes as an array. Same warning as ``stringValue()``.
    public func copyBytes() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// A short fingerprint (keyed BLAKE2b, 4 bytes, hex) to tell secrets apart in this
    /// process's logs without showing them.
    ///
    /// Keyed with a random key made once per process, so it cannot be brute-forced back to a
    /// short secret (a PIN) nor used to confirm a guessed token, and it differs from one run to
    /// the next. Listings of a store use ``TokenStore/fingerprint(of:)`` instead, which is
    /// stable for that store.
    public var fingerprint: String {
        let digest = Self.processFingerprintKey.withUnsafeBytes { key in
            withUnsafeBytes { Blake2b.digest($0, key: key, length: 4) }
        }
        return Hex.encode(digest)
    }

    /// The per-process fingerprint key (guarded memory, never written anywhere).
    private static let processFingerprintKey = SecretBytes.random(count: 32)

    public var description: String { "SecretBytes(\(count) bytes, fp \(fingerprint))" }
    public var debugDescription: String { description }

    /// Constant-time comparison.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in ConstantTime.equal(a, b) } }
    }
}
