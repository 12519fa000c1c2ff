internal import CTSS2
#if canImport(Glibc)
import Glibc
#endif

/// One connection to a TPM 2.0 (a TCTI context and an ESYS context over it), for
/// ``TPMKeyProvider``: creates, loads and flushes transient objects, seals and unseals.
/// ``TPMSigningDoor`` adds its create and sign (`TPMSession+Signing.swift`).
///
/// A TPM without a resource manager (swtpm over TCP, `/dev/tpm0`) has 3 transient object slots
/// and serves one connection at a time, so: only one session per TPM exists in a process at a
/// time (``with(tcti:timeout:_:)`` holds that TPM's lock), every object a call makes is flushed before
/// the call returns (errors included: ``withTransient(_:_:)``), and the session is closed
/// (ESYS, then the TCTI) before the session's work returns. A TPM that does not answer within
/// the time-out is `tpmUnavailable` (``TPMDeadline``), never a hang.
///
/// Not Sendable: used only inside ``with(tcti:timeout:_:)``, on the session's thread.
final class TPMSession {
    /// The TCTI configuration, as the TCTI loader takes it: `device:/dev/tpmrm0`, `swtpm:host=…,port=…`.
    let tcti: String
    /// tpm2-tss's functions.
    let api: tokenstore_tss2
    private var tctiContext: OpaquePointer?
    private var esys: OpaquePointer?
    /// TPM commands sent through this session, for the benchmark (``TPMKeyProvider/operationsPerOpen``).
    var commands = 0

    /// How long one session (a store's open, a signature) may wait for the TPM: a session is at
    /// most 9 commands (a few ms on swtpm, 0.1–0.6 s on a real TPM), but a TPM behind a resource
    /// manager may be busy with another process's long command, and a loaded machine under a
    /// sanitizer has taken over 5 s for one swtpm session.
    static let defaultTimeout: Duration = .seconds(10)

    /// The locks behind "one TCTI context at a time", one per TPM (TCTI configuration).
    private static let locks = Locked([String: StoreLock]())

    /// TPM commands sent by the sessions of this process: in all, and per TCTI.
    private static let sent = Locked((total: 0, byTCTI: [String: Int]()))

    /// TPM commands sent by every session of this process so far.
    static var commandCount: Int { sent.withLock { $0.total } }

    /// TPM commands sent to the TPM `tcti` names by this process so far (for tests and
    /// benchmarks that share the process with other TPMs' users).
    static func commandCount(tcti: String) -> Int { sent.withLock { $0.byTCTI[tcti] ?? 0 } }

    private init(tcti: String, api: tokenstore_tss2) {
        self.tcti = tcti
        self.api = api
    }

    /// Opens a session on `tcti`, runs `body`, closes the session, under that TPM's lock, on a
    /// thread of its own (``TPMDeadline``) that the caller waits for at most `timeout`.
    /// - Throws: `tpmUnavailable` (no TPM answers at `tcti`, or not within `timeout`), and
    ///   whatever `body` throws.
    /// `startup: false` leaves TPM2_Startup out: the caller sends ``startup()`` itself when an
    /// answer says the TPM was never started or restarted (``startingIfAsked(_:_:)``, which the
    /// store's open, seal and probe use; a DPoP proof's saved context), so that a TPM the firmware
    /// or the kernel started, as every desktop's is, gets no TPM2_Startup at all.
    static func with<R>(
        tcti: String, timeout: Duration = defaultTimeout, startup: Bool = true,
        _ body: @escaping (TPMSession) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        // A module given as a path would be dlopen'ed by the TCTI loader: any file as a library.
        guard !TPMIdentity.namesAPath(tcti) else { throw TPMDiagnosis.pathRefused(tcti: tcti) }
        let api = try TSS2Library.loaded().api
        let lock = locks.withLock { locks in
            if let lock = locks[tcti] { return lock }
            let lock = StoreLock()
            locks[tcti] = lock
            return lock
        }
        return try TPMDeadline.run(tcti: tcti, timeout: timeout) { () -> Result<R, TokenStoreError> in
            do {
                return try lock.withLock { () -> Result<R, TokenStoreError> in
                    let session = TPMSession(tcti: tcti, api: api)
                    defer {
                        session.close()
                        sent.withLock {
                            $0.total += session.commands
                            $0.byTCTI[tcti, default: 0] += session.commands
                        }
                    }
                    do {
                        try session.open(startup: startup)
                        return .success(try body(session))
                    } catch let error as TokenStoreError {
                        return .failure(error)
                    }
                }
            } catch let error as TokenStoreError {
                return .failure(error)
            } catch {
                return .failure(TokenStoreError(.ioError, "The TPM lock failed."))
            }
        }
    }

    // MARK: - Connection

    /// The descriptors open in this process now (`/proc/self/fd`).
    private static func openDescriptors() -> Set<Int32> {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var found = Set<Int32>()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if let descriptor = Int32(name) { found.insert(descriptor) }
        }
        return found
    }

    /// Sets FD_CLOEXEC on `descriptors` (one another thread opened in the same instant gets it
    /// too: it then does not reach a program started later, as if opened with O_CLOEXEC).
    private static func markCloseOnExec(_ descriptors: Set<Int32>) {
        for descriptor in descriptors {
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    private func open(startup: Bool) throws(TokenStoreError) {
        Self.quietLibraryLog()
        var context: OpaquePointer?
        // tpm2-tss opens its socket or device without O_CLOEXEC: a program this process starts
        // meanwhile (the browser of a sign-in, any child) would inherit the TPM connection and
        // keep it open after this session closed its copy, and swtpm or a TPM without a resource
        // manager, which serve one connection at a time, would then serve nobody else (seen in
        // the test suite: a test server spawned during a TPM session held swtpm's connection, and
        // every later TPM call timed out). The descriptors the loader opens are marked here.
        let before = Self.openDescriptors()
        let loaded = tcti.withCString { api.tctildr_initialize($0, &context) }
        Self.markCloseOnExec(Self.openDescriptors().subtracting(before))
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
        if startup { try self.startup() }
    }

    /// Runs `command` (it sends one TPM command and counts it); when the TPM answers
    /// TPM_RC_INITIALIZE (it was never started: a swtpm fresh from its state without its
    /// startup flag, a TPM no firmware started), sends TPM2_Startup and runs it once more. So a
    /// session opened with `startup: false` sends TPM2_Startup only when the TPM asks for it.
    /// A TCTI failure (nothing answered) is `tpmUnavailable` "did not answer" (`step`).
    func startingIfAsked(_ step: String, _ command: () -> TSS2_RC) throws(TokenStoreError) -> TSS2_RC {
        var rc = command()
        if rc == tokenstore_rc_initialize {
            try startup()
            rc = command()
        }
        if TPMDiagnosis.isTCTIFailure(rc) { throw TPMDiagnosis.unavailable(tcti: tcti, rc: rc, step: step) }
        return rc
    }

    /// TPM2_Startup(CLEAR). TPM2_RC_INITIALIZE: it was already done (by the firmware, the
    /// resource manager, or swtpm's startup-clear flag): the TPM is ready.
    func startup() throws(TokenStoreError) {
        let esys = try context()
        commands += 1
        let started = api.esys_startup(esys, TPM2_SU(TPM2_SU_CLEAR))
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

    func context() throws(TokenStoreError) -> OpaquePointer {
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
    /// key each time on the same TPM (empty owner auth assumed, as on every desktop; an owner
    /// password or a lockout is named as such: ``TPMDiagnosis/ownerAuthorization(rc:)``).
    /// - Returns: the transient object and its TPM name (a digest of its public area).
    func createPrimary() throws(TokenStoreError) -> (object: Object, name: [UInt8]) {
        let esys = try context()
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_primary_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle: ESYS_TR = tokenstore_esys_tr_none
        let rc = try startingIfAsked("TPM2_CreatePrimary") {
            commands += 1
            return api.esys_create_primary(
                esys, tokenstore_esys_tr_owner, tokenstore_esys_tr_password, tokenstore_esys_tr_none,
                tokenstore_esys_tr_none, &sensitive, &template, &outside, &pcrs, &handle, nil, nil, nil, nil)
        }
        guard rc == TSS2_RC_SUCCESS else {
            if let what = TPMDiagnosis.ownerAuthorization(rc: rc) {
                throw TPMDiagnosis.ownerRefused(tcti: tcti, what: what, rc: rc)
            }
            throw TPMDiagnosis.failed("TPM2_CreatePrimary", tcti: tcti, rc: rc)
        }
        let object = Object(handle: handle)
        do {
            return (object, try name(of: object))
        } catch {
            flush(object)
            throw error
        }
    }

    /// The TPM name of `object`: nameAlg + digest of the public area ESYS keeps for it, computed
    /// by Esys_TR_GetName (no TPM command).
    func name(of object: Object) throws(TokenStoreError) -> [UInt8] {
        let esys = try context()
        var namePointer: UnsafeMutablePointer<TPM2B_NAME>?
        let named = api.esys_tr_get_name(esys, object.handle, &namePointer)
        guard named == TSS2_RC_SUCCESS, let namePointer else {
            throw TPMDiagnosis.failed("reading the primary key's name", tcti: tcti, rc: named)
        }
        defer { api.esys_free(namePointer) }
        return withUnsafeBytes(of: namePointer.pointee.name) { Array($0.prefix(Int(namePointer.pointee.size))) }
    }

    /// Runs `body` with a new salted, encrypting HMAC session (``tokenstore_tpm_start_salted_session``:
    /// salted to `salt`, AES-128-CFB both ways, ended by the TPM with the one command it
    /// authorizes): the session a command that carries a secret uses, so that the secret crosses
    /// the TPM interface (a discrete TPM's bus) encrypted under a key only this TPM and this
    /// process know, new each time. One command (TPM2_StartAuthSession); flushed when `body` fails.
    func withEncryptedSession<R>(salt: Object, _ body: (ESYS_TR) throws(TokenStoreError) -> R) throws(TokenStoreError) -> R {
        let esys = try context()
        var api = self.api
        var handle: ESYS_TR = tokenstore_esys_tr_none
        commands += 1
        let rc = tokenstore_tpm_start_salted_session(&api, esys, salt.handle, &handle)
        guard rc == TSS2_RC_SUCCESS else {
            if handle != tokenstore_esys_tr_none { flush(Object(handle: handle)) }
            throw TPMDiagnosis.failed("TPM2_StartAuthSession", tcti: tcti, rc: rc)
        }
        do {
            return try body(handle)
        } catch {
            flush(Object(handle: handle))  // a failed command does not end the session
            throw error
        }
    }

    /// TPM2_Create of a sealed data object holding `data` under `parent`, the data encrypted on
    /// the way in (``withEncryptedSession(salt:_:)``, salted to `parent`).
    /// - Returns: the object's public and private parts, marshalled (TPM2B_PUBLIC, TPM2B_PRIVATE).
    func seal(_ data: SecretBytes, under parent: Object) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_sealed_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { tokenstore_tpm_wipe(&sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size) }
        let filled = data.withUnsafeBytes { bytes in
            tokenstore_tpm_sensitive(&sensitive, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        }
        guard filled == 0 else { throw TokenStoreError(.invalidInput, "The data to seal is too long for the TPM.") }
        return try create(&template, &sensitive, under: parent)
    }

    /// TPM2_Create of an object from `template` and `sensitive` under `parent`, authorized by a
    /// salted session that encrypts `sensitive` (``withEncryptedSession(salt:_:)``).
    /// - Returns: the object's public and private parts, marshalled (TPM2B_PUBLIC, TPM2B_PRIVATE).
    func create(
        _ template: inout TPM2B_PUBLIC, _ sensitive: inout TPM2B_SENSITIVE_CREATE, under parent: Object
    ) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        try withEncryptedSession(salt: parent) { session throws(TokenStoreError) in
            try create(&template, &sensitive, under: parent, session: session)
        }
    }

    private func create(
        _ template: inout TPM2B_PUBLIC, _ sensitive: inout TPM2B_SENSITIVE_CREATE, under parent: Object, session: ESYS_TR
    ) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        let esys = try context()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        commands += 1
        let rc = api.esys_create(
            esys, parent.handle, session, tokenstore_esys_tr_none, tokenstore_esys_tr_none,
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
    func load(
        public publicBytes: [UInt8], private privateBytes: [UInt8], under parent: Object,
        subject: String = "This store's data key was sealed"
    ) throws(TokenStoreError) -> Object {
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
                throw TPMDiagnosis.mismatch(tcti: tcti, detail: TPMDiagnosis.decode(rc), subject: subject)
            }
            throw TPMDiagnosis.failed("TPM2_Load", tcti: tcti, rc: rc)
        }
        return Object(handle: handle)
    }

    /// TPM2_Unseal of a loaded sealed object, the answer encrypted on the way out by a session
    /// salted to `salt` (the primary it was loaded under: ``withEncryptedSession(salt:_:)``).
    func unseal(_ object: Object, salt: Object) throws(TokenStoreError) -> SecretBytes {
        try withEncryptedSession(salt: salt) { session throws(TokenStoreError) in try unseal(object, session: session) }
    }

    /// TPM2_Unseal in `session`; a refusal `refused` names (a PIN's) is its error, any other failure `tpmUnavailable`.
    func unseal(
        _ object: Object, session: ESYS_TR, refused: (TSS2_RC) -> TokenStoreError? = { _ in nil }
    ) throws(TokenStoreError) -> SecretBytes {
        let esys = try context()
        var outData: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        commands += 1
        let rc = api.esys_unseal(esys, object.handle, session, tokenstore_esys_tr_none, tokenstore_esys_tr_none, &outData)
        guard rc == TSS2_RC_SUCCESS, let outData else { throw refused(rc) ?? TPMDiagnosis.failed("TPM2_Unseal", tcti: tcti, rc: rc) }
        defer {
            tokenstore_tpm_wipe(outData, MemoryLayout<TPM2B_SENSITIVE_DATA>.size)
            api.esys_free(outData)
        }
        let count = Int(outData.pointee.size)
        return withUnsafeBytes(of: &outData.pointee.buffer) { SecretBytes($0.prefix(count)) }
    }
}
