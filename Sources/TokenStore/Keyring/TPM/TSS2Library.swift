internal import CTSS2

/// tpm2-tss, loaded (`dlopen`) at the first TPM call, not linked: libtss2-esys brings libcrypto
/// and libtss2-sys, which a process that never asks a TPM (most apps, most tokenctl commands)
/// then does not load. See `Sources/CTSS2/shim.h`.
final class TSS2Library: @unchecked Sendable {  // the table is written once, before the object is shared
    /// The function table (filled by `tokenstore_tss2_load`, kept for the life of the process; a
    /// function added to it goes last, and every file that reads it is rebuilt: SwiftPM does not
    /// rebuild a Swift file for a change in shim.h alone).
    private let table: UnsafePointer<tokenstore_tss2>

    /// The functions.
    var api: tokenstore_tss2 { table.pointee }

    private init(_ table: UnsafePointer<tokenstore_tss2>) { self.table = table }

    /// tpm2-tss, loaded once per process; a failure is kept, so every TPM call reports it the same way.
    static let shared: Result<TSS2Library, TokenStoreError> = load()

    /// The loaded library, or `tpmUnavailable` saying which part of tpm2-tss is missing.
    static func loaded() throws(TokenStoreError) -> TSS2Library { try shared.get() }

    private static func load() -> Result<TSS2Library, TokenStoreError> {
        let table = UnsafeMutablePointer<tokenstore_tss2>.allocate(capacity: 1)
        var missing: UnsafePointer<CChar>?
        let status = tokenstore_tss2_load(table, &missing)
        guard status == 0 else {
            table.deallocate()
            let name = missing.map { String(cString: $0) } ?? "tpm2-tss"
            let what = status == 1 ? "\(name) could not be loaded" : "the tpm2-tss installed lacks \(name)"
            return .failure(TokenStoreError(
                .tpmUnavailable, "No usable TPM: tpm2-tss is not usable (\(what)).",
                hint: "Install tpm2-tss 3.x (Debian: libtss2-esys-3.0.2-0, libtss2-tctildr0, libtss2-mu0, libtss2-rc0)."))
        }
        return .success(TSS2Library(table))
    }
}
