internal import CTSS2
#if canImport(Glibc)
import Glibc
#endif

/// One connection to a TPM 2.0 (a TCTI context and an ESYS context over it), for
/// ``TPMKeyProvider``: creates, loads and flushes transient objects, seals and unseals.
/// A later TPM-resident signing key (DPoP) adds its create/sign here.
///
/// A TPM without a resource manager (swtpm over TCP, `/dev/tpm0`) has 3 transient object slots
/// and serves one connection at a time, so: only one session exists in a process at a time
/// (``with(tcti:_:)`` holds a process-wide lock), every object a call makes is flushed before
/// the call returns (errors included: ``withTransient(_:_:)``), and the session is closed
/// (ESYS, then the TCTI) before ``with(tcti:_:)`` returns.
///
/// Not Sendable: used only inside ``with(tcti:_:)`` on the calling thread.
final class TPMSession {
    /// The TCTI configuration, as the TCTI loader takes it: `device:/dev/tpmrm0`, `swtpm:host=…,port=…`.
    let tcti: String
    /// tpm2-tss's functions.
    private let api: tokenstore_tss2
    private var tctiContext: OpaquePointer?
    private var esys: OpaquePointer?
    /// TPM commands sent through this session, for the benchmark (``TPMKeyProvider/operationsPerOpen``).
    private(set) var commands = 0

    /// The one lock behind "one TCTI context at a time".
    private static let lock = StoreLock()
    /// TPM commands sent by every session of this process.
    nonisolated(unsafe) private static var totalCommands = 0

    /// TPM commands sent by every session of this process so far (read under the lock).
    static var commandCount: Int { (try? lock.withLock { totalCommands }) ?? 0 }

    private init(tcti: String, api: tokenstore_tss2) {
        self.tcti = tcti
        self.api = api
    }

    /// Opens a session on `tcti`, runs `body`, closes the session, all under the process-wide lock.
    /// - Throws: `tpmUnavailable` (no TPM answers at `tcti`), and whatever `body` throws.
    static func with<R>(tcti: String, _ body: (TPMSession) throws(TokenStoreError) -> R) throws(TokenStoreError) -> R {
        let api = try TSS2Library.loaded().api
        let result: Result<R, TokenStoreError>
        do {
            result = try lock.withLock { () -> Result<R, TokenStoreError> in
                let session = TPMSession(tcti: tcti, api: api)
                defer {
                    session.close()
                    totalCommands += session.commands
                }
                do {
                    try session.open()
                    return .success(try body(session))
                } catch let error as TokenStoreError {
                    return .failure(error)
                }
            }
        } catch let error as TokenStoreError {
            throw error
        } catch {
            throw TokenStoreError(.ioError, "The TPM lock failed.")
        }
        return try result.get()
    }

    // MARK: - Connection

    private func open() throws(TokenStoreError) {
        Self.quietLibraryLog()
        var context: OpaquePointer?
        let loaded = tcti.withCString { api.tctildr_initialize($0, &context) }
        guard loaded == TSS2_RC_SUCCESS, let context else {
            throw TPMDiagnosis.unavailable(tcti: tcti, rc: loaded, step: "connecting")
        }
        tctiContext = context
        var esysContext: OpaquePointer?
        let initialized = api.esys_initialize(&esysContext, context, nil)
        guard initialized == TSS2_RC_SUCCESS, let esysContext else {
            throw TPMDiagnosis.unavailable(tcti: tcti, rc: initialized, step: "initializing ESYS")
        }
        esys = esysContext
        commands += 1
        let started = api.esys_startup(esysContext, TPM2_SU(TPM2_SU_CLEAR))
        // TPM2_RC_INITIALIZE: TPM2_Startup was already done (by the firmware, the resource
        // manager, or swtpm's startup-clear flag): the TPM is ready.
        guard started == TSS2_RC_SUCCESS || started == tokenstore_rc_initialize else {
            throw TPMDiagnosis.unavailable(tcti: tcti, rc: started, step: "TPM2_Startup")
        }
    }

    private func close() {
        if esys != nil { api.esys_finalize(&esys) }
        if tctiContext != nil { api.tctildr_finalize(&tctiContext) }
    }

    /// tpm2-tss logs every failed command on stderr ("WARNING:esys:…") unless `TSS2_LOG` says
    /// otherwise; TokenStore reports its own typed errors, so the library's log is off unless the
    /// user set `TSS2_LOG`. Set under the lock before the first call (the log reads it once).
    private static func quietLibraryLog() {
        if getenv("TSS2_LOG") == nil { setenv("TSS2_LOG", "all+NONE", 0) }
    }

    private func context() throws(TokenStoreError) -> OpaquePointer {
        guard let esys else { throw TokenStoreError(.ioError, "The TPM session is closed.") }
        return esys
    }

    // MARK: - Objects

    /// A transient object in the TPM, flushed by ``withTransient(_:_:)``.
    struct Object {
        let handle: ESYS_TR
    }

    /// Runs `body` with `object`, then flushes it whatever `body` did.
    func withTransient<R>(_ object: Object, _ body: (Object) throws(TokenStoreError) -> R) throws(TokenStoreError) -> R {
        defer { flush(object) }
        return try body(object)
    }

    /// TPM2_FlushContext; a failure is ignored (the session closes next, and a TPM with a
    /// resource manager flushes the connection's objects itself).
    func flush(_ object: Object) {
        guard let esys else { return }
        commands += 1
        _ = api.esys_flush_context(esys, object.handle)
    }

    /// TPM2_CreatePrimary in the owner hierarchy with TokenStore's storage template: the same
    /// key each time on the same TPM (empty owner auth assumed, as on every desktop).
    /// - Returns: the transient object and its TPM name (a digest of its public area).
    func createPrimary() throws(TokenStoreError) -> (object: Object, name: [UInt8]) {
        let esys = try context()
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_primary_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle: ESYS_TR = tokenstore_esys_tr_none
        commands += 1
        let rc = api.esys_create_primary(
            esys, tokenstore_esys_tr_owner, tokenstore_esys_tr_password, tokenstore_esys_tr_none,
            tokenstore_esys_tr_none, &sensitive, &template, &outside, &pcrs, &handle, nil, nil, nil, nil)
        guard rc == TSS2_RC_SUCCESS else { throw TPMDiagnosis.failed("TPM2_CreatePrimary", tcti: tcti, rc: rc) }
        let object = Object(handle: handle)
        var namePointer: UnsafeMutablePointer<TPM2B_NAME>?
        let named = api.esys_tr_get_name(esys, handle, &namePointer)
        guard named == TSS2_RC_SUCCESS, let namePointer else {
            flush(object)
            throw TPMDiagnosis.failed("reading the primary key's name", tcti: tcti, rc: named)
        }
        defer { api.esys_free(namePointer) }
        let name = withUnsafeBytes(of: namePointer.pointee.name) { Array($0.prefix(Int(namePointer.pointee.size))) }
        return (object, name)
    }

    /// TPM2_Create of a sealed data object holding `data` under `parent`.
    /// - Returns: the object's public and private parts, marshalled (TPM2B_PUBLIC, TPM2B_PRIVATE).
    func seal(_ data: SecretBytes, under parent: Object) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        let esys = try context()
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_sealed_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { tokenstore_tpm_wipe(&sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size) }
        let filled = data.withUnsafeBytes { bytes in
            tokenstore_tpm_sensitive(&sensitive, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        }
        guard filled == 0 else { throw TokenStoreError(.invalidInput, "The data to seal is too long for the TPM.") }
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        commands += 1
        let rc = api.esys_create(
            esys, parent.handle, tokenstore_esys_tr_password, tokenstore_esys_tr_none, tokenstore_esys_tr_none,
            &sensitive, &template, &outside, &pcrs, &outPrivate, &outPublic, nil, nil, nil)
        defer {
            if let outPrivate { api.esys_free(outPrivate) }
            if let outPublic { api.esys_free(outPublic) }
        }
        guard rc == TSS2_RC_SUCCESS, let outPrivate, let outPublic else {
            throw TPMDiagnosis.failed("TPM2_Create", tcti: tcti, rc: rc)
        }
        return (try TPMMarshal.public(outPublic.pointee, api), try TPMMarshal.private(outPrivate.pointee, api))
    }

    /// TPM2_Load of a sealed object's marshalled parts under `parent`.
    /// - Throws: `tpmMismatch` when the TPM refuses the parts (sealed by another TPM or another
    ///   primary key), `integrityCheckFailed` when they do not unmarshal.
    func load(public publicBytes: [UInt8], private privateBytes: [UInt8], under parent: Object) throws(TokenStoreError) -> Object {
        let esys = try context()
        var inPublic = try TPMMarshal.unmarshalPublic(publicBytes, api)
        var inPrivate = try TPMMarshal.unmarshalPrivate(privateBytes, api)
        var handle: ESYS_TR = tokenstore_esys_tr_none
        commands += 1
        let rc = api.esys_load(
            esys, parent.handle, tokenstore_esys_tr_password, tokenstore_esys_tr_none, tokenstore_esys_tr_none,
            &inPrivate, &inPublic, &handle)
        guard rc == TSS2_RC_SUCCESS else {
            // TPM_RC_INTEGRITY or TPM_RC_BINDING (format-1 TPM errors, layer 0) for well-formed
            // parts: the TPM cannot verify them under this parent, i.e. they were made by another
            // TPM (or another owner seed). Any other answer (no object slot left, …) is not that.
            let formatOne = rc & tokenstore_rc_layer_mask == 0 && rc & 0x80 != 0
            if formatOne && [0x1F, 0x25].contains(rc & 0x3F) {
                throw TPMDiagnosis.mismatch(tcti: tcti, detail: TPMDiagnosis.decode(rc))
            }
            throw TPMDiagnosis.failed("TPM2_Load", tcti: tcti, rc: rc)
        }
        return Object(handle: handle)
    }

    /// TPM2_Unseal of a loaded sealed object.
    func unseal(_ object: Object) throws(TokenStoreError) -> SecretBytes {
        let esys = try context()
        var outData: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        commands += 1
        let rc = api.esys_unseal(esys, object.handle, tokenstore_esys_tr_password, tokenstore_esys_tr_none, tokenstore_esys_tr_none, &outData)
        guard rc == TSS2_RC_SUCCESS, let outData else { throw TPMDiagnosis.failed("TPM2_Unseal", tcti: tcti, rc: rc) }
        defer {
            tokenstore_tpm_wipe(outData, MemoryLayout<TPM2B_SENSITIVE_DATA>.size)
            api.esys_free(outData)
        }
        let count = Int(outData.pointee.size)
        return withUnsafeBytes(of: &outData.pointee.buffer) { SecretBytes($0.prefix(count)) }
    }
}
