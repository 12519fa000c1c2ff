import CTokenStore
import TokenStore

// ts_store_open_with_pin (include/tokenstore.h): a store opened with its TPM + PIN key slot.

@c @implementation
public func ts_store_open_with_pin(
    _ pathOrNull: UnsafePointer<CChar>!, _ appID: UnsafePointer<CChar>!, _ pin: UnsafePointer<UInt8>!, _ pinLength: Int,
    _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        try CStoreOpen.run(out, pathOrNull, appID) { path, appID in
            let provider = TPMPINKeyProvider(pin: try CInput.pin(pin, pinLength))
            do {
                return try TokenStore(path: path, appID: appID, keyProvider: provider)
            } catch let error as TokenStoreError
                where error.code == .wrongKeyProvider && [.secretService, .portal].contains(error.recordedKeyProvider)
            {
                throw NoPINSlot(error: error)
            }
        }
    }
}

extension CInput {
    /// A TPM PIN of `length` bytes at `bytes`, copied into guarded memory (locked, out of core
    /// dumps, wiped when the last reference goes): never a `String`, never logged.
    /// - Throws: `invalidInput` for NULL bytes with a length, or a length outside
    ///   ``TPMPINKeyProvider/pinLengths`` (the TPM is not asked).
    static func pin(_ bytes: UnsafePointer<UInt8>?, _ length: Int) throws -> SecretBytes {
        guard length == 0 || bytes != nil else { throw invalid("The PIN is NULL with a non-zero length.") }
        let range = TPMPINKeyProvider.pinLengths
        guard range.contains(length) else {
            // size_t arrives as Int: a length with the top bit set reads as negative.
            throw invalid("A TPM PIN must be \(range.lowerBound) to \(range.upperBound) bytes, not \(UInt(bitPattern: length)).")
        }
        return SecretBytes(UnsafeBufferPointer(start: bytes, count: length))
    }
}

/// ts_store_open_with_pin's `wrongKeyProvider` for a store that ts_store_open opens (its key in the
/// Secret Service or under the portal, no TPM PIN key slot): the hint says so (``ErrorText``).
struct NoPINSlot: Error {
    let error: TokenStoreError
    static let hint = "This store has no TPM PIN key slot: open it with ts_store_open (its key is in the Secret Service or "
        + "under the Secret portal), then add a PIN slot with 'tokenctl slot add tpm-pin --pin-fd N'. Nothing was changed."
}
