internal import CSodium
import TokenStore

/// Random values of the browser sign-in, from libsodium's CSPRNG (`randombytes_buf`).
enum SignInRandom {
    /// `sodium_init` once per process (it is idempotent and thread-safe; this keeps it off
    /// every call).
    private static let initialized: Bool = sodium_init() >= 0

    /// `count` random bytes.
    static func bytes(_ count: Int) -> [UInt8] {
        precondition(initialized, "libsodium failed to initialise")
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
        return bytes
    }

    /// 32 random bytes as 43 characters of base64url (a `state` or `nonce`).
    static func token() -> String {
        Base64URL.encode(bytes(32))
    }
}
