internal import CGlibcExtensions
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The thread that turns writes to a store file into ``StoreChange``s for a ``ChangeHub``.
///
/// It sleeps in `poll(2)` on two descriptors, with no time-out while nothing happens (no
/// polling loop: an idle watcher uses no CPU):
/// - an inotify watch on the database's folder, filtered to the database and its -wal: every
///   commit of another process writes the -wal, and a commit that logged changes then touches
///   its modification time (``ChangeHub/committed(databasePath:)``);
/// - an eventfd this process's own commits and ``stop()`` write to.
///
/// At a wake-up it reads `PRAGMA data_version` on the store's connection (it moves when another
/// connection committed) and, when it moved or the wake-up came from this process, the change
/// log after the last sequence number it saw. Rows it never saw that are gone (pruned while it
/// was not scheduled, a reset) are made up for by diffing its snapshot of the store. After the
/// file's writes it checks once more, ``followUp`` later: a reader may see a commit's frames
/// before the commit itself, and the touch that follows the commit may never come (a writer
/// killed in between).
///
/// The log is sealed under the data key, so a locked store cannot be read: the thread that is
/// about to wipe the key reads what was committed until then first (``readBeforeLock(_:envelope:hub:)``),
/// and those changes reach subscribers before `storeLocked`.
final class ChangeWatcher: @unchecked Sendable {  // the descriptors are immutable; `stopped` and `position` are behind their locks
    /// Where a watcher is: the newest sequence number it read, `PRAGMA data_version`, and the snapshot.
    struct Position {
        var seq: Int64
        var dataVersion: Int64
        /// nil when watching began on a locked store (nothing sealed could be read): taken at the
        /// first read after the unlock.
        var snapshot: ChangeLog.Snapshot?
    }

    static let followUp: Int32 = 250  // milliseconds

    private let inotifyFD: Int32
    private let wakeFD: Int32
    private let names: Set<String>
    private let logger: TokenStoreLogger
    private let stopped = Locked(false)
    /// Where the reads got to (set by ``start(hub:connection:from:)``); read and advanced with the
    /// store's connection lock held, by this thread or by one about to wipe the key.
    private let position = Locked<Position?>(nil)

    /// Watches the folder of `databasePath`.
    /// - Throws: `ioError` when inotify or the eventfd cannot be set up.
    init(databasePath: String, logger: TokenStoreLogger) throws {
        let slash = databasePath.lastIndex(of: "/")
        let folder = slash.map { $0 == databasePath.startIndex ? "/" : String(databasePath[..<$0]) } ?? "."
        let name = slash.map { String(databasePath[databasePath.index(after: $0)...]) } ?? databasePath
        names = [name, name + "-wal"]
        self.logger = logger
        inotifyFD = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard inotifyFD >= 0 else {
            throw TokenStoreError(.ioError, "The store's folder cannot be watched for changes.", cause: .posix(errno: errno, operation: "inotify_init1"))
        }
        let mask = UInt32(IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE)
        guard inotify_add_watch(inotifyFD, folder, mask) >= 0 else {
            let code = errno
            close(inotifyFD)
            throw TokenStoreError(.ioError, "The store's folder cannot be watched for changes.", cause: .posix(errno: code, operation: "inotify_add_watch"))
        }
        wakeFD = tokenstore_wake_fd()
        guard wakeFD >= 0 else {
            let code = errno
            close(inotifyFD)
            throw TokenStoreError(.ioError, "The store's change watcher could not be set up.", cause: .posix(errno: code, operation: "eventfd"))
        }
    }

    deinit {
        close(inotifyFD)
        close(wakeFD)
    }

    /// Starts the thread from `position`, reading through `connection` and delivering to `hub`.
    /// - Returns: false when no thread could be made.
    func start(hub: ChangeHub, connection: StoreConnection, from start: Position) -> Bool {
        position.withLock { $0 = start }
        return DetachedThread.start(name: "ts-changes") { [self] in run(hub: hub, connection: connection) }
    }

    /// Wakes the thread for a check (a commit of this process).
    func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { write(wakeFD, $0.baseAddress, 8) }  // a full counter still wakes it
    }

    /// Makes the thread end at its next wake-up, which this causes.
    func stop() {
        stopped.withLock { $0 = true }
        wake()
    }

    private func run(hub: ChangeHub, connection: StoreConnection) {
        var force = true  // once at the start: anything between the starting point and the watch
        var checkDue = false
        var followUpArmed = false
        while !stopped.withLock({ $0 }) {
            if force || checkDue {
                do {
                    hub.deliver(try check(connection, force: force, hub: hub), newest: newestRead)
                } catch let error as TokenStoreError where error.code == .storeClosed {
                    hub.watcherEnded(self, error: nil)
                    return
                } catch let error as TokenStoreError where error.code == .storeLocked {
                    // Locked: nothing can be read until it unlocks (the log is sealed under the key).
                } catch {
                    logger.info(
                        "the change watcher could not read the store; it tries again at the next change",
                        metadata: ["error": TokenStoreError.code(of: error)])
                }
                // What came without this thread's read: a lock, and what was read just before it.
                hub.deliver(hub.takeQueued(), newest: newestRead)
                force = false
                checkDue = false
            }
            var fds = [pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, followUpArmed ? Self.followUp : -1)
            if ready == 0 {  // quiet for `followUp` after the file's writes: the follow-up check
                followUpArmed = false
                checkDue = true
                continue
            }
            if ready < 0 { continue }  // EINTR
            if fds[1].revents != 0 {
                var counter: UInt64 = 0
                _ = withUnsafeMutableBytes(of: &counter) { read(wakeFD, $0.baseAddress, 8) }  // resets the counter
                force = true
            }
            if fds[0].revents != 0, drainInotify() {
                checkDue = true
                followUpArmed = true
            }
        }
    }

    /// Reads every queued inotify event; true when one concerns the database or its -wal (or
    /// the queue overflowed).
    private func drainInotify() -> Bool {
        var relevant = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = read(inotifyFD, buffer, size)
            guard count > 0 else { return relevant }
            var offset = 0
            while offset + 16 <= count {
                let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { relevant = true }
                if length > 0, offset + 16 + length <= count {
                    let bytes = UnsafeRawBufferPointer(start: buffer + offset + 16, count: length)
                    let name = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
                    if names.contains(name) { relevant = true }
                }
                offset += 16 + length
            }
        }
    }

    /// The newest sequence number read so far.
    private var newestRead: Int64 { position.withLock { $0?.seq ?? 0 } }

    /// One check: the changes queued for the watcher until the read began (lock transitions, and
    /// what was read before a lock: they come first), then what the read finds (``advance(_:envelope:force:)``).
    private func check(_ connection: StoreConnection, force: Bool, hub: ChangeHub) throws -> [ChangeHub.Queued] {
        try connection.read { db, envelope in
            let queued = hub.takeQueued()
            return try queued + advance(db, envelope: envelope, force: force)
        }
    }

    /// With the store's connection lock held, its key still in hand (`envelope`), about to wipe
    /// it: the changes committed until now that this watcher has not read are read and queued
    /// (``ChangeHub/queue(_:)``), ahead of the `storeLocked` that follows. A failure leaves them
    /// for the first read after the unlock (logged, never thrown: the lock goes ahead).
    func readBeforeLock(_ db: Database, envelope: Envelope, hub: ChangeHub) {
        do {
            hub.queue(try db.readTransaction { try advance(db, envelope: envelope, force: true) })
        } catch {
            logger.info(
                "the change watcher could not read the changes made before a lock; they are reported after the unlock",
                metadata: ["error": TokenStoreError.code(of: error)])
        }
    }

    /// Inside a transaction, with the connection lock held: the log after the position when the
    /// file changed (or `force`), the snapshot diffed when rows are missing; the position moves
    /// on. Coalesced: within what one read finds, a renewal of an account already reported since
    /// its last sign-in or sign-out, and a second key switch, are left out.
    private func advance(_ db: Database, envelope: Envelope, force: Bool) throws -> [ChangeHub.Queued] {
        guard let current = position.withLock({ $0 }) else { return [] }  // not started: its starting point is read after this
        let version = try db.dataVersion()
        guard force || version != current.dataVersion else { return [] }
        var next = current
        next.dataVersion = version
        var found: [(seq: Int64, change: StoreChange)] = []
        if try ChangeLog.exists(db) {
            let read = try ChangeLog.read(db, after: current.seq, envelope: envelope)
            found = read.changes
            if var snapshot = next.snapshot {
                for (_, change) in found { snapshot.apply(change, keyID: envelope.keyID) }
                if read.gap {
                    let fresh = try ChangeLog.Snapshot.take(db, envelope: envelope)
                    found += snapshot.changes(to: fresh).map { (read.newest, $0) }
                    snapshot = fresh
                    logger.info("the change watcher missed logged changes; it reported the difference of the store instead")
                }
                next.snapshot = snapshot
            } else {
                next.snapshot = try ChangeLog.Snapshot.take(db, envelope: envelope)
                if read.gap {
                    logger.info("the change watcher missed logged changes made while the store was locked; nothing to diff them against")
                }
            }
            next.seq = read.newest
        }
        position.withLock { $0 = next }
        return Self.coalesced(found).map { ($0.seq, $0.change) }
    }

    static func coalesced(_ changes: [(seq: Int64, change: StoreChange)]) -> [(seq: Int64, change: StoreChange)] {
        var renewed: Set<AccountID> = []
        var rotated = false
        return changes.filter { entry in
            switch entry.change {
            case .tokensRenewed(let account): return renewed.insert(account).inserted
            case .accountAdded(let account), .accountRemoved(let account):
                renewed.remove(account)
                return true
            case .keyRotated:
                defer { rotated = true }
                return !rotated
            case .credentialStateChanged, .storeLocked, .storeUnlocked:
                return true
            }
        }
    }
}
