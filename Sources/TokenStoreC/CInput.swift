import AuthSession
import CTokenStore
import Glibc
import TokenStore

/// Validation of what C hands in, and the reporting of errors back: every entry point runs
/// its body through ``CCall/run(_:_:)``, so a thrown error becomes `TS_ERROR` plus a `ts_error`
/// and no Swift error or trap crosses into the caller.
enum CInput {
    /// The longest C string read: a longer one (or one without its NUL within reach) is refused.
    static let maxStringBytes = StoreLimits.maxIdentifierBytes

    static func invalid(_ message: String) -> TokenStoreError { TokenStoreError(.invalidInput, message) }

    /// A required NUL-terminated UTF-8 string.
    static func string(_ pointer: UnsafePointer<CChar>?, _ what: String) throws -> String {
        guard let pointer else { throw invalid("The \(what) is NULL.") }
        let length = strnlen(pointer, maxStringBytes + 1)
        guard length <= maxStringBytes else { throw invalid("The \(what) is longer than \(maxStringBytes) bytes.") }
        let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(pointer), count: length)
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw invalid("The \(what) is not valid UTF-8.")
        }
        return string
    }

    /// An optional string: NULL stays `nil`.
    static func optionalString(_ pointer: UnsafePointer<CChar>?, _ what: String) throws -> String? {
        guard pointer != nil else { return nil }
        return try string(pointer, what)
    }

    /// A caller's options struct that begins with `size_t struct_size`: the size is read first,
    /// since only that many bytes of the caller's struct may be read (an older header's struct
    /// is shorter, a newer one's longer than understood here); it must be one of `knownSizes`
    /// (the sizes of the headers released). The fields after the caller's size keep `empty`'s.
    static func versionedOptions<Options>(
        _ pointer: UnsafePointer<Options>, empty: Options, knownSizes: [Int], typeName: String
    ) throws -> Options {
        let size = UnsafeRawPointer(pointer).load(as: Int.self)
        guard knownSizes.contains(size) else {
            throw invalid(
                size > MemoryLayout<Options>.size
                    ? "The options' struct_size is that of a newer tokenstore.h than this library's: build against the library's header."
                    : "The options' struct_size is not sizeof(\(typeName)): use \(typeName)_init().")
        }
        var options = empty
        withUnsafeMutableBytes(of: &options) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: size)) }
        return options
    }

    /// An out-parameter that must not be NULL.
    static func out<T>(_ pointer: UnsafeMutablePointer<T>?, _ what: String) throws -> UnsafeMutablePointer<T> {
        guard let pointer else { throw invalid("The \(what) out-parameter is NULL.") }
        return pointer
    }

    /// The account named by (service or NULL for the default, account).
    static func account(service: UnsafePointer<CChar>?, account: UnsafePointer<CChar>?) throws -> AccountID {
        let name = try string(account, "account")
        let service = try optionalString(service, "service") ?? AccountID.defaultService
        return AccountID(name, service: service)
    }

    static func kind(_ kind: ts_kind) throws -> ItemKind {
        switch kind {
        case TS_KIND_REFRESH_TOKEN: return .refreshToken
        case TS_KIND_APPLE_USER_ID: return .appleUserID
        case TS_KIND_ACCESS_TOKEN: return .accessToken
        case TS_KIND_GENERIC: return .generic
        case TS_KIND_ID_TOKEN: return .idToken
        case TS_KIND_PROFILE: return .profile
        default: throw invalid("The item kind is not a ts_kind value.")
        }
    }

    /// `length` bytes at `bytes`, copied; NULL is allowed only with length 0.
    static func secret(_ bytes: UnsafePointer<UInt8>?, _ length: Int) throws -> SecretBytes {
        // size_t arrives as Int: a length with the top bit set reads as negative.
        guard length >= 0, length <= StoreLimits.maxSecretBytes else {
            throw invalid("The length is over \(StoreLimits.maxSecretBytes) bytes.")
        }
        guard length == 0 || bytes != nil else { throw invalid("The bytes are NULL with a non-zero length.") }
        guard let bytes else { return SecretBytes([UInt8]()) }
        return SecretBytes(UnsafeBufferPointer(start: bytes, count: length))
    }
}

enum CCall {
    static let ok = CInt(TS_OK)
    static let notFound = CInt(TS_NOT_FOUND)
    static let error = CInt(TS_ERROR)

    /// Runs one entry point: a thrown error becomes `TS_ERROR` and, when `err` is not NULL,
    /// a `ts_error` in `*err`.
    static func run(_ err: UnsafeMutablePointer<OpaquePointer?>?, _ body: () throws -> CInt) -> CInt {
        do {
            return try body()
        } catch {
            if let err {
                let (code, message) = describe(error)
                err.pointee = OpaquePointer(Unmanaged.passRetained(ErrorBox(code: code, message: message)).toOpaque())
            }
            return Self.error
        }
    }

    /// The code and message of an error (``ErrorText``). A store error that comes through the
    /// session layer (`AuthSessionError.storage`) keeps the store's own code, e.g. `keyringLocked`.
    static func describe(_ error: any Error) -> (code: String, message: String) { ErrorText.describe(error) }
}
