internal import CCrypto

/// libcrypto, loaded (`dlopen`) at the first RS256 key, not linked: most processes (an app
/// reading its store, most tokenctl commands) never verify an ID token. See `Sources/CCrypto/shim.h`.
enum CryptoLibrary {
    /// The function table, loaded once per process (Swift runs a static initialiser once,
    /// thread-safely); nil when libcrypto.so.3 cannot be loaded or lacks a function.
    static let api: tokenstore_crypto? = {
        let table = UnsafeMutablePointer<tokenstore_crypto>.allocate(capacity: 1)
        defer { table.deallocate() }
        guard tokenstore_crypto_load(table) == 0 else { return nil }
        return table.pointee
    }()
}
