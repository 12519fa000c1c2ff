import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension StoreConnection {
    static func monotonicNanos() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// With ``TokenStore/Options/lockAfterIdle``: a thread that locks this object (its key wiped)
    /// once no read or write came for that long. It holds the connection weakly and ends with it
    /// (or when the store is closed).
    func startIdleLock() {
        guard let idle = options.lockAfterIdle else { return }
        let idleNanos = UInt64(max(0, idle.wholeNanoseconds))
        lastUse.store(Self.monotonicNanos(), ordering: .relaxed)
        DetachedThread.start(name: "ts-idle-lock") { [weak self] in
            var pause = idleNanos
            while true {
                usleep(useconds_t(min(max(pause / 1_000, 1_000), 1_000_000)))  // at most 1 s, so a released store ends it soon
                guard let next = self?.idleCheck(idleNanos: idleNanos) else { return }
                pause = next
            }
        }
    }

    /// Locks the object when it has been idle `idleNanos`; returns how long to wait before the
    /// next check, nil when the store is closed.
    private func idleCheck(idleNanos: UInt64) -> UInt64? {
        let now = Self.monotonicNanos()
        let idleFor = now &- lastUse.load(ordering: .relaxed)
        if idleFor < idleNanos { return idleNanos - idleFor }
        do {
            try withDatabase { _ in
                guard lockState.load(ordering: .acquiring) == LockReason.unlocked.rawValue else { return }
                wipeKey(.here)
                logger.info("store locked after being idle")
            }
        } catch {
            return nil  // closed
        }
        return idleNanos
    }
}
