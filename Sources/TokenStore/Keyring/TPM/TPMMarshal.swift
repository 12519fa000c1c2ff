internal import CTSS2

/// TPM2B_PUBLIC and TPM2B_PRIVATE to and from their TPM wire form (tss2-mu), for the sealed blob.
enum TPMMarshal {
    static func `public`(_ value: TPM2B_PUBLIC, _ api: tokenstore_tss2) throws(TokenStoreError) -> [UInt8] {
        var value = value
        return try marshal(MemoryLayout<TPM2B_PUBLIC>.size) { buffer, size, offset in
            api.mu_public_marshal(&value, buffer, size, offset)
        }
    }

    static func `private`(_ value: TPM2B_PRIVATE, _ api: tokenstore_tss2) throws(TokenStoreError) -> [UInt8] {
        var value = value
        return try marshal(MemoryLayout<TPM2B_PRIVATE>.size) { buffer, size, offset in
            api.mu_private_marshal(&value, buffer, size, offset)
        }
    }

    static func unmarshalPublic(_ bytes: [UInt8], _ api: tokenstore_tss2) throws(TokenStoreError) -> TPM2B_PUBLIC {
        var value = TPM2B_PUBLIC()
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { api.mu_public_unmarshal($0.baseAddress, $0.count, &offset, &value) }
        guard rc == TSS2_RC_SUCCESS, offset == bytes.count else { throw malformed("public") }
        return value
    }

    static func unmarshalPrivate(_ bytes: [UInt8], _ api: tokenstore_tss2) throws(TokenStoreError) -> TPM2B_PRIVATE {
        var value = TPM2B_PRIVATE()
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { api.mu_private_unmarshal($0.baseAddress, $0.count, &offset, &value) }
        guard rc == TSS2_RC_SUCCESS, offset == bytes.count else { throw malformed("private") }
        return value
    }

    private static func marshal(
        _ capacity: Int, _ body: (UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>) -> TSS2_RC
    ) throws(TokenStoreError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var offset = 0
        let rc = buffer.withUnsafeMutableBufferPointer { body($0.baseAddress, $0.count, &offset) }
        guard rc == TSS2_RC_SUCCESS else { throw TokenStoreError(.ioError, "A TPM object did not marshal (\(TPMDiagnosis.decode(rc))).") }
        return Array(buffer.prefix(offset))
    }

    private static func malformed(_ part: String) -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "The sealed key's \(part) part is not a TPM object; nothing was changed.")
    }
}
