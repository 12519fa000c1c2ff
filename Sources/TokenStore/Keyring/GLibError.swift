internal import CGIO
internal import CLibSecret

/// Turns a `GError` from libsecret/GIO into a ``TokenStoreError`` with the cause attached.
enum GLibError {
    /// Reads and frees `error`; `nil` stays `nil`.
    static func take(_ error: UnsafeMutablePointer<GError>?) -> TokenStoreError.Cause? {
        guard let error else { return nil }
        defer { g_error_free(error) }
        return cause(of: error)
    }

    static func cause(of error: UnsafeMutablePointer<GError>) -> TokenStoreError.Cause {
        let domain = g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "unknown"
        let message = error.pointee.message.map { String(cString: $0) } ?? ""
        return .glib(domain: domain, code: error.pointee.code, message: message)
    }

    /// Classifies `error` (and frees it) into the error the key provider throws.
    ///
    /// - `SECRET_ERROR_IS_LOCKED` → `keyringLocked`
    /// - `G_IO_ERROR_CANCELLED` → `cancelled`; the GIO/D-Bus time-outs → `timedOut`
    /// - no bus, no name owner, connection failures, a bus autolaunch (dbus-launch) that could
    ///   not be started or failed → `secretServiceUnavailable`
    /// - anything else → `ioError`
    static func classify(
        _ error: UnsafeMutablePointer<GError>, operation: String
    ) -> TokenStoreError {
        defer { g_error_free(error) }
        let cause = cause(of: error)
        let domain = error.pointee.domain
        let code = error.pointee.code

        if domain == secret_error_get_quark() {
            if code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
                return TokenStoreError(
                    .keyringLocked, "The keyring holding the data key is locked (\(inWords(operation))).",
                    hint: TokenStoreError.unlockHint, cause: cause)
            }
            return TokenStoreError(
                .ioError, "The Secret Service refused the request (\(inWords(operation))).", cause: cause)
        }
        if domain == g_io_error_quark() {
            if code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
                return TokenStoreError(.cancelled, "The Secret Service call was cancelled (\(inWords(operation))).", cause: cause)
            }
            if code == Int32(G_IO_ERROR_TIMED_OUT.rawValue) {
                return TokenStoreError(
                    .timedOut, "The Secret Service did not answer in time (\(inWords(operation))).",
                    hint: notAnsweringHint, cause: cause)
            }
            // Connecting to the session bus failed: no address, autolaunch impossible,
            // socket missing or refused, connection closed.
            return unavailable(operation, cause)
        }
        if domain == g_dbus_error_quark() {
            switch GDBusError(rawValue: UInt32(bitPattern: code)) {
            case G_DBUS_ERROR_NO_REPLY, G_DBUS_ERROR_TIMEOUT, G_DBUS_ERROR_TIMED_OUT:
                return TokenStoreError(
                    .timedOut, "The Secret Service did not answer in time (\(inWords(operation))).",
                    hint: notAnsweringHint, cause: cause)
            case G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER,
                G_DBUS_ERROR_NO_SERVER, G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_BAD_ADDRESS,
                G_DBUS_ERROR_NO_NETWORK, G_DBUS_ERROR_NOT_SUPPORTED, G_DBUS_ERROR_UNKNOWN_METHOD,
                G_DBUS_ERROR_UNKNOWN_INTERFACE, G_DBUS_ERROR_UNKNOWN_OBJECT,
                G_DBUS_ERROR_SPAWN_EXEC_FAILED, G_DBUS_ERROR_SPAWN_FORK_FAILED,
                G_DBUS_ERROR_SPAWN_CHILD_EXITED, G_DBUS_ERROR_SPAWN_CHILD_SIGNALED,
                G_DBUS_ERROR_SPAWN_FAILED, G_DBUS_ERROR_SPAWN_SETUP_FAILED,
                G_DBUS_ERROR_SPAWN_CONFIG_INVALID, G_DBUS_ERROR_SPAWN_SERVICE_INVALID,
                G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND, G_DBUS_ERROR_SPAWN_PERMISSIONS_INVALID,
                G_DBUS_ERROR_SPAWN_FILE_INVALID, G_DBUS_ERROR_SPAWN_NO_MEMORY:
                return unavailable(operation, cause)
            default:
                return TokenStoreError(
                    .ioError, "The Secret Service call failed (\(inWords(operation))).", cause: cause)
            }
        }
        if domain == g_spawn_error_quark() || domain == g_spawn_exit_error_quark() {
            // No session bus address, but a DISPLAY (ssh -X): GLib tried to autolaunch a bus
            // with dbus-launch, which failed to start (not installed: a spawn error) or ran and
            // failed (installed, as dbus-x11 is on most desktops, but no X server answers at
            // that DISPLAY: its exit status, in the spawn-exit domain).
            return unavailable(operation, cause)
        }
        return TokenStoreError(.ioError, "The Secret Service call failed (\(inWords(operation))).", cause: cause)
    }

    /// The hint of `timedOut`: a service owns the name but does not answer.
    static let notAnsweringHint =
        "A Secret Service is running on the session bus but not answering; check or restart it "
        + "(e.g. gnome-keyring-daemon --replace --components=secrets)."

    /// What an internal operation name ("load key") means to a user, for the parentheses of a
    /// message: "while reading the store's data key". An unknown name is shown as it is.
    static func inWords(_ operation: String) -> String {
        switch operation {
        case "load key": return "while reading the store's data key"
        case "store key": return "while saving a new data key"
        case "delete key": return "while deleting a data key"
        case "key availability": return "while checking for the store's data key"
        case "unlock keyring": return "while unlocking the keyring"
        case "read store epoch": return "while reading the store epoch"
        case "raise store epoch": return "while raising the store epoch"
        case "delete store epoch": return "while deleting the store epoch"
        case "identify provider": return "while asking which program serves the keyring"
        case "secret service probe": return "while looking for a Secret Service"
        default: return operation
        }
    }

    static func unavailable(_ operation: String, _ cause: TokenStoreError.Cause?) -> TokenStoreError {
        TokenStoreError(
            .secretServiceUnavailable,
            "No Secret Service answered on the session bus (\(inWords(operation))).",
            hint: TokenStoreError.secretServiceHint, cause: cause)
    }
}
