import Foundation
import TestSupport
import TokenStore

// tokenstore-testchild watch STORE IDLE_MS
//   Opens the store and subscribes to its changes (observeChanges), prints "READY", then the CPU
//   time the process used while idle for IDLE_MS ("IDLE cpu_us=<n> wall_ms=<n>"), then runs until
//   it is killed, printing each change as "EVENT <kind> <CLOCK_MONOTONIC ns> <subject>" (the
//   account's name, or "<user>:<from>:<to>"; test identifiers only).
func runWatchMode(_ args: [String]) throws -> Never {
    guard args.count >= 3, let idleMillis = Int(args[2]) else { fail("watch STORE IDLE_MS") }
    let store = try TokenStore(path: args[1], appID: "dev.tokenstore.tests")
    let observation = try store.observeChanges { change in
        let subject: String
        switch change {
        case .accountAdded(let account), .accountRemoved(let account), .tokensRenewed(let account): subject = account.name
        case .credentialStateChanged(let userID, let from, let to): subject = "\(userID):\(from.rawValue):\(to.rawValue)"
        default: subject = "-"
        }
        say("EVENT \(change.kind.rawValue) \(monotonicNanoseconds()) \(subject)")
    }
    say("READY")
    let cpuBefore = processCPUMicroseconds()
    let wallBefore = monotonicNanoseconds()
    usleep(useconds_t(idleMillis * 1000))
    let cpu = processCPUMicroseconds() - cpuBefore
    say("IDLE cpu_us=\(cpu) wall_ms=\((monotonicNanoseconds() - wallBefore) / 1_000_000)")
    while true {
        _ = withExtendedLifetime(observation) { sleep(60) }
    }
}

/// User + system CPU time of the whole process (every thread), in microseconds.
func processCPUMicroseconds() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + Int(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}
