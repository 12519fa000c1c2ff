import FoundationEssentials

extension TokenStore {
    /// Options of a store, fixed at open.
    public struct Options: Sendable, Equatable {
        /// Rotate the data key when the last account is logged out (no items and no pending
        /// revocations left), so that ciphertext left in free pages, the WAL or old backups
        /// cannot be opened with the current key (crypto-erase). On by default.
        public var rotatesKeyAfterLastLogout: Bool

        /// Open the store for reading only: an existing store at the newest schema version, with
        /// its data key. Nothing is created, migrated or written, the file's mode is not
        /// tightened, and no -wal/-shm side file is added when there is none; every write call
        /// throws `invalidInput`. A store that needs a migration is `migrationRequired`; an empty
        /// file, or a store with no data key yet, is `notAStore`. Off by default.
        public var readOnly: Bool

        /// The access policy to open with (see ``AccessPolicy``). nil: the one the store records
        /// (``AccessPolicy/afterFirstUnlock`` for a new store). A stronger one than recorded is
        /// recorded (a read-only open applies it without writing it); a weaker one does not lower
        /// the recorded one, which applies.
        public var accessPolicy: AccessPolicy?

        /// Lock the store object by itself (as ``TokenStore/lock(allProcesses:)``: the data key
        /// wiped, `storeLocked` until ``TokenStore/unlock(allProcesses:)``) after this long without
        /// a read or a write. nil (the default): never.
        public var lockAfterIdle: Duration? = nil

        /// Under a ``AccessPolicy/userPresence(_:)`` policy, the item kinds whose reads need the
        /// user's presence besides the refresh token and generic items, which always do: e.g.
        /// `[.accessToken]` to gate cached access tokens too (by default they go through, so a
        /// renewal within their lifetime asks nothing). Chosen by each app at open, not recorded
        /// in the store: it only adds kinds, it never lets the refresh token or generic items through.
        public var userPresenceAlsoFor: Set<ItemKind> = []

        /// How long the user has to answer polkit's authentication dialog before the read
        /// fails with `timedOut` (the check is then cancelled at polkit).
        package var userPresenceTimeout: Duration = .seconds(120)

        /// The system bus polkit is asked on; nil: GIO's (`DBUS_SYSTEM_BUS_ADDRESS`, else the
        /// system's socket). For tests, which run a polkit stand-in on a private bus.
        package var polkitBusAddress: String? = nil

        /// Options with the defaults.
        public init(rotatesKeyAfterLastLogout: Bool = true, readOnly: Bool = false) {
            self.rotatesKeyAfterLastLogout = rotatesKeyAfterLastLogout
            self.readOnly = readOnly
            accessPolicy = nil
        }

        /// Options with an access policy to open with (see ``accessPolicy``).
        public init(rotatesKeyAfterLastLogout: Bool = true, readOnly: Bool = false, accessPolicy: AccessPolicy?) {
            self.init(rotatesKeyAfterLastLogout: rotatesKeyAfterLastLogout, readOnly: readOnly)
            self.accessPolicy = accessPolicy
        }
    }
}

