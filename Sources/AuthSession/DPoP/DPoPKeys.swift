import TokenStore

/// Where a store's DPoP key comes from: the one place that chooses it, by the store's
/// capability, not its key provider's type. On a store whose data key is sealed by a TPM (the
/// `hardware` or `softwareTPM` tier: `TokenStore.hardwareKeyTCTI`, the provider's `tpmTCTI`) the
/// key is made inside that TPM (``TPMSigningKey``, over TokenStore's `TPMSigningDoor`: the store
/// keeps its blob, every proof is a `TPM2_Sign`); on every other store it is a software
/// ``DPoPKey`` whose private scalar is sealed in the store under the data key. Either way the
/// material is sealed in the store with its residence tag (`DPoPKeyMaterial`,
/// `DPoPKeyResidence`), and the caller sees only ``DPoPSigningKey``.
package enum DPoPKeys {
    /// The store's DPoP key, made (and kept) at the first call: one key per store, never a new
    /// one once made. Of two processes making one at once, the first to commit wins and both
    /// use its key.
    /// - Throws: ``AuthSessionError`` `storage`, `dpopKeyLost` (the store's key is unusable), or
    ///   `unexpectedResponse` (libcrypto could not make the key).
    package static func loadOrCreate(store: TokenStore) async throws -> any DPoPSigningKey {
        if let key = try await load(store: store) { return key }
        if let tcti = store.hardwareKeyTCTI {
            let made = try await StoreWork.run { try await store.onBlockingExecutor { _ in try TPMSigningKey.create(tcti: tcti) } }
            let kept = try await StoreWork.perform(on: store) {
                try $0.storeDPoPKeyMaterial(DPoPKeyMaterial(residence: .tpm, bytes: SecretBytes(made.blob)))
            }
            return try key(from: kept, store: store)
        }
        let made = try signing { () throws(DPoPSigningFailure) -> DPoPKey in try DPoPKey.generate() }
        var scalar = try signing { () throws(DPoPSigningFailure) -> [UInt8] in try made.privateScalar() }
        let bytes = SecretBytes(scalar + made.publicPoint)
        for index in scalar.indices { scalar[index] = 0 }
        let kept = try await StoreWork.perform(on: store) { try $0.storeDPoPKeyMaterial(DPoPKeyMaterial(residence: .software, bytes: bytes)) }
        return try key(from: kept, store: store)
    }

    /// The store's DPoP key, or nil when it has none.
    /// - Throws: ``AuthSessionError`` `storage`, or `dpopKeyLost` (material that is not a key,
    ///   a residence this build cannot use).
    package static func load(store: TokenStore) async throws -> (any DPoPSigningKey)? {
        guard let material = try await StoreWork.perform(on: store, { try $0.dpopKeyMaterial() }) else { return nil }
        return try key(from: material, store: store)
    }

    private static func key(from material: DPoPKeyMaterial, store: TokenStore) throws -> any DPoPSigningKey {
        switch material.residence {
        case .software:
            var bytes = material.bytes.copyBytes()
            defer { for index in bytes.indices { bytes[index] = 0 } }
            guard bytes.count == 97 else {
                throw AuthSessionError(.dpopKeyLost, "The store's DPoP key is not a P-256 key.")
            }
            var scalar = Array(bytes[0..<32])
            defer { for index in scalar.indices { scalar[index] = 0 } }
            let point = Array(bytes[32...])
            return try signing { () throws(DPoPSigningFailure) -> DPoPKey in try DPoPKey(privateScalar: scalar, publicPoint: point) }
        case .tpm:
            guard let tcti = store.hardwareKeyTCTI else {
                throw AuthSessionError(.dpopKeyLost, "The store's DPoP key lives in a TPM, but the store is not opened with the TPM key provider.")
            }
            do {
                return try TPMSigningKey.load(blob: material.bytes.copyBytes(), tcti: tcti)
            } catch {
                throw AuthSessionError(.dpopKeyLost, "The store's TPM-resident DPoP key is not usable: \(error.code).", cause: .storage(error))
            }
        }
    }

    private static func signing<T>(_ body: () throws(DPoPSigningFailure) -> T) throws -> T {
        do { return try body() } catch {
            switch error {
            case .store(let failure): throw AuthSessionError.storage(failure)
            case .libraryUnavailable, .refused:
                throw AuthSessionError(.unexpectedResponse, "The DPoP key could not be made or read (libcrypto).")
            }
        }
    }
}
