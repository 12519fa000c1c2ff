internal import CCrypto

/// SHA-256 through OpenSSL's libcrypto (EVP API).
enum SHA256Digest {
    /// The 32-byte SHA-256 digest of `bytes`.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let status = digest.withUnsafeMutableBufferPointer { output in
            EVP_Digest(bytes.baseAddress, bytes.count, output.baseAddress, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with SHA-256 fails only when libcrypto cannot allocate a context.
        precondition(status == 1 && length == 32, "libcrypto could not compute SHA-256")
        return digest
    }

    /// The SHA-256 digest of `bytes`.
    static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        let array = Array(bytes)
        return array.withUnsafeBytes { hash($0) }
    }
}
