internal import CCurl

/// libcurl, loaded (`dlopen`) and initialised at the first transfer, not linked: its ~30
/// dependent libraries then cost nothing to a process that never sends a request (most
/// tokenctl commands, an app reading its store). See `Sources/CCurl/shim.h`.
final class CurlLibrary: @unchecked Sendable {  // the table is written once, before the object is shared
    /// The function table (filled by `tokenstore_curl_load`, kept for the life of the process).
    let table: UnsafePointer<tokenstore_curl>

    /// The functions.
    var api: tokenstore_curl { table.pointee }

    private init(_ table: UnsafePointer<tokenstore_curl>) { self.table = table }

    /// libcurl, loaded and initialised once per process (Swift runs a static initialiser
    /// once, thread-safely); a failure is kept, so every request reports it the same way.
    static let shared: Result<CurlLibrary, TransportFailure> = load()

    /// libcurl's generic text for a result code (names no host and no data).
    static func text(for code: CURLcode) -> String {
        guard case .success(let curl) = shared else { return "libcurl error \(code.rawValue)" }
        return curl.text(for: code)
    }

    /// libcurl's generic text for a result code (names no host and no data).
    func text(for code: CURLcode) -> String {
        api.easy_strerror(code).map { String(cString: $0) } ?? "libcurl error \(code.rawValue)"
    }

    private static func load() -> Result<CurlLibrary, TransportFailure> {
        let table = UnsafeMutablePointer<tokenstore_curl>.allocate(capacity: 1)
        switch tokenstore_curl_load(table) {
        case 0:
            break
        case 1:
            table.deallocate()
            return .failure(TransportFailure(.other, "libcurl (libcurl.so.4) could not be loaded; install libcurl4."))
        default:
            table.deallocate()
            return .failure(
                TransportFailure(.other, "The libcurl installed (libcurl.so.4) is too old: 7.68 or later is needed."))
        }
        guard table.pointee.global_init(tokenstore_curl_global_default()) == CURLE_OK else {
            return .failure(TransportFailure(.other, "libcurl could not be initialised."))
        }
        return .success(CurlLibrary(table))
    }
}
