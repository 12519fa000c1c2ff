import AuthSession
import TokenStore

/// The code and message of a `ts_error`. The code is its own field (`ts_error_code`), so the
/// message holds what follows it in the Swift `description` (the message, the cause, the hint)
/// without repeating it: C prints `code: message` and Python's `str(error)` is the same. Hints
/// that name Swift API a C or Python caller cannot use (a key provider, a Swift parameter) are
/// replaced by what `ts_store_open`'s caller can do.
enum ErrorText {
    static func describe(_ error: any Error) -> (code: String, message: String) {
        switch error {
        case let error as TokenStoreError:
            return (error.code.rawValue, text(error))
        case let refused as NoPINSlot:
            return (refused.error.code.rawValue, text(refused.error, hint: NoPINSlot.hint))
        case let error as AuthSessionError:
            if case .storage(let storeError)? = error.cause {
                return (storeError.code.rawValue, text(storeError))
            }
            return (error.code.rawValue, withoutHead(error.description, "\(AuthSessionError.self).\(error.code.rawValue): "))
        case is CancellationError:
            return (TokenStoreError.Code.cancelled.rawValue, "The operation was cancelled.")
        default:
            // Not one of the library's errors: its text is not known to be free of secrets.
            return ("internalError", "An unexpected error of type \(type(of: error)).")
        }
    }

    /// `message (cause) Hint: …`, the hint as a C caller can follow it.
    static func text(_ error: TokenStoreError, hint givenHint: String? = nil) -> String {
        var text = error.message
        if let cause = error.cause { text += " (\(cause))" }
        if let hint = givenHint ?? hint(for: error) { text += " Hint: \(hint)" }
        return text
    }

    /// The Swift `description` after its `TypeName.code: ` head.
    static func withoutHead(_ description: String, _ head: String) -> String {
        description.hasPrefix(head) ? String(description.dropFirst(head.count)) : description
    }

    static func hint(for error: TokenStoreError) -> String? {
        switch error.code {
        case .secretServiceUnavailable:
            return "Start a Secret Service (gnome-keyring-daemon --start --components=secrets, KeePassXC or KWallet) in the "
                + "user's session, and check that DBUS_SESSION_BUS_ADDRESS names that session's bus. ts_store_open keeps "
                + "the store's key in the Secret Service (inside a Flatpak sandbox: under the Secret portal)."
        case .keyringLocked:
            return "Unlock the login keyring (log in to the desktop session, or run 'tokenctl unlock'), then open the store again."
        case .wrongKeyProvider:
            let recorded = error.recordedKeyProvider.map { " ('\($0)')" } ?? ""
            return "ts_store_open opens stores whose key is in the Secret Service or under the Secret portal; this store's "
                + "key was made by another key provider\(recorded): open it with tokenctl (--passphrase-fd N, --key-provider "
                + "tpm), with ts_store_open_with_pin when it has a TPM PIN key slot, or from Swift. Do not reset it: nothing is lost."
        default:
            return error.hint
        }
    }
}
