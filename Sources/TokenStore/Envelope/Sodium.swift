internal import CSodium
import FoundationEssentials

/// libsodium initialisation, once per process.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0
    static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise")
    }
}
