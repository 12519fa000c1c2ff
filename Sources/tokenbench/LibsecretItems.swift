internal import CLibSecret
import Foundation

/// One Secret Service item per token, the design of keyring-rs, Python keyring and
/// secret-tool: a schema with `service` and `username` attributes, items in the default
/// (persistent) collection, through the non-variadic libsecret password calls
/// (`secret_password_storev_sync`, `…lookupv_sync`, `…clearv_sync`), called directly on the
/// calling thread (no worker thread, no timeout: the cheapest way to call them).
final class LibsecretItems {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static let schemaName = "dev.tokenstore.bench.Item"
    private let schema: UnsafeMutablePointer<SecretSchema>

    init() throws {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
        defer { g_hash_table_unref(types) }
        let stringType = UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue))
        g_hash_table_insert(types, g_strdup("service"), stringType)
        g_hash_table_insert(types, g_strdup("username"), stringType)
        guard let schema = secret_schema_newv(Self.schemaName, SECRET_SCHEMA_NONE, types) else {
            throw Failure(description: "libsecret: secret_schema_newv failed")
        }
        self.schema = schema
    }

    deinit { secret_schema_unref(schema) }

    /// Stores (or replaces) the token of item `index`.
    func store(index: Int, value: [UInt8]) throws {
        try withAttributes(index) { attributes in
            var text = value
            text.append(0)
            var error: UnsafeMutablePointer<GError>?
            let ok = text.withUnsafeBufferPointer { password in
                password.withMemoryRebound(to: CChar.self) { chars in
                    secret_password_storev_sync(
                        schema, attributes, "default", "bench \(index)", chars.baseAddress, nil, &error)
                }
            }
            try Self.check(error, "store")
            guard ok != 0 else { throw Failure(description: "libsecret: store answered FALSE") }
        }
    }

    /// The token of item `index`, or nil.
    func lookup(index: Int) throws -> [UInt8]? {
        try withAttributes(index) { attributes in
            var error: UnsafeMutablePointer<GError>?
            let password = secret_password_lookupv_sync(schema, attributes, nil, &error)
            try Self.check(error, "lookup")
            guard let password else { return nil }
            defer { secret_password_free(password) }
            let count = strlen(password)
            return Array(UnsafeRawBufferPointer(start: password, count: count))
        }
    }

    /// Deletes item `index`; returns whether something was deleted.
    @discardableResult
    func clear(index: Int) throws -> Bool {
        try withAttributes(index) { attributes in
            var error: UnsafeMutablePointer<GError>?
            let cleared = secret_password_clearv_sync(schema, attributes, nil, &error)
            try Self.check(error, "clear")
            return cleared != 0
        }
    }

    /// Lists the items of the benchmark (attributes only, no secrets loaded): what a keyring
    /// library's "list credentials" does. Returns the count.
    func list() throws -> Int {
        let attributes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        defer { g_hash_table_unref(attributes) }
        g_hash_table_insert(attributes, g_strdup("service"), g_strdup(Workload.service))
        var error: UnsafeMutablePointer<GError>?
        let found = secret_password_searchv_sync(schema, attributes, SECRET_SEARCH_ALL, nil, &error)
        if let error {
            if let found { g_list_free_full(found, g_object_unref) }
            try Self.check(error, "list")
        }
        guard let found else { return 0 }
        defer { g_list_free_full(found, g_object_unref) }
        return Int(g_list_length(found))
    }

    /// Deletes every item of the benchmark schema (the whole population).
    func clearAll() throws {
        let attributes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        defer { g_hash_table_unref(attributes) }
        g_hash_table_insert(attributes, g_strdup("service"), g_strdup(Workload.service))
        var error: UnsafeMutablePointer<GError>?
        _ = secret_password_clearv_sync(schema, attributes, nil, &error)
        try Self.check(error, "clear all")
    }

    private func withAttributes<R>(_ index: Int, _ body: (OpaquePointer) throws -> R) throws -> R {
        let attributes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        defer { g_hash_table_unref(attributes) }
        g_hash_table_insert(attributes, g_strdup("service"), g_strdup(Workload.service))
        g_hash_table_insert(attributes, g_strdup("username"), g_strdup(Workload.account(index)))
        return try body(attributes)
    }

    private static func check(_ error: UnsafeMutablePointer<GError>?, _ operation: String) throws {
        guard let error else { return }
        let message = error.pointee.message.map { String(cString: $0) } ?? "unknown"
        g_error_free(error)
        throw Failure(description: "libsecret \(operation): \(message)")
    }

    /// The libsecret headers this was built against.
    static var version: String { "\(SECRET_MAJOR_VERSION).\(SECRET_MINOR_VERSION).\(SECRET_MICRO_VERSION)" }
}
