#if canImport(Glibc)
import Glibc
#endif

// Stopping the listener: the state these touch (`phase`, `stopRequested`, the descriptors) is
// read and written under `lock` only, here and in the main file.
extension LoopbackRedirectListener {
    func stop() {
        lock.withLock { _ in
            stopRequested = true
            wakeLocked()
        }
    }

    /// Wakes the serving thread's `poll`. Under `lock`, so the socket cannot be closed meanwhile.
    func wakeLocked() {
        guard wakeWrite >= 0 else { return }
        var byte: UInt8 = 1
        _ = send(wakeWrite, &byte, 1, Int32(MSG_NOSIGNAL))  // a full buffer already wakes it
    }

    var isStopRequested: Bool { lock.withLock { _ in stopRequested } }

    /// Closes every descriptor still open and marks the listener closed.
    func closeDescriptors() {
        lock.withLock { _ in closeDescriptorsLocked() }
    }

    func closeDescriptorsLocked() {
        // A program another thread is spawning holds a copy of the listening socket until its
        // exec, and a plain close would leave the port listening until then. Shutting the
        // socket down takes it out of LISTEN for every holder, so the port is free at once
        // (for a new SO_REUSEADDR bind, as the next listener makes).
        if listenDescriptor >= 0 { shutdown(listenDescriptor, Int32(SHUT_RDWR)) }
        for descriptor in [listenDescriptor, wakeRead, wakeWrite] where descriptor >= 0 {
            Glibc.close(descriptor)
        }
        listenDescriptor = -1
        wakeRead = -1
        wakeWrite = -1
        phase = .closed
    }
}
