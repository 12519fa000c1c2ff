import Foundation
import TestSupport
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

/// `tokenbench session-lock ITERATIONS DIR`: what the desktop session's lock costs a `whenUnlocked`
/// store (the access policies' performance figures), on stores of 100 items with the Secret Service key
/// provider (inside scripts/with-keyring). logind is python3-dbusmock's `logind` template on a
/// private system bus of this process's own (logind cannot run here), the session found through
/// `XDG_SESSION_ID`; its session object gets two methods of ours, `TimedLock` / `TimedUnlock`,
/// which return python's `time.monotonic_ns()` (`CLOCK_MONOTONIC`, this process's clock too) and
/// then emit the session's `Lock` / `Unlock`, so the latency starts at the signal, not at the
/// `gdbus call` that asks for it.
/// - `signal_to_locked_p50_ms`: the `Lock` signal until this process's next read throws
///   `storeLocked` (the key dropped and wiped by the lock source's thread; goal ≤ 200 ms);
/// - `unlock_read_p50_ms`: the `Unlock` signal until the first read that succeeds (the key
///   fetched again from the provider), against `cold_open_read_p50_ms`, a new store object's
///   open and first read (goal: ≤ 1.2 × that);
/// - `get_after_first_unlock_p50_us` against `get_when_unlocked_p50_us`: a `get` on a store
///   under the default policy and on one under `whenUnlocked` while the session is unlocked (the
///   lock check on the read path is one atomic load), interleaved rounds.
/// Prints `METRIC bench_session_lock …`.
enum SessionLockBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 3, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("session-lock ITERATIONS DIR")
        }
        let bus = try PrivateBus()
        let logind = try DBusMock(template: "logind", name: "org.freedesktop.login1", bus: .system, environment: bus.environment)
        let login1 = "org.freedesktop.login1", session = "/org/freedesktop/login1/session/bench1"
        try logind.call(login1, "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession", ["bench1", "seat0", "\(getuid())", "bench", "true"])
        for (method, signal) in [("TimedLock", "Lock"), ("TimedUnlock", "Unlock")] {
            try logind.call(login1, session, "org.freedesktop.DBus.Mock.AddMethod", [
                "org.freedesktop.login1.Session", method, "", "t",
                "ret = __import__('time').monotonic_ns(); self.EmitSignal('org.freedesktop.login1.Session', '\(signal)', '', [])",
            ])
        }
        // The lock source reads them at its start (the first whenUnlocked open).
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1)
        setenv("XDG_SESSION_ID", "bench1", 1)

        let appID = "dev.tokenstore.bench"
        let key = ItemKey(account: AccountID("user-0@example.com", service: Workload.service), kind: .generic)
        func filled(_ name: String, _ options: TokenStore.Options) throws -> (String, TokenStore) {
            let path = arguments[2] + "/\(name)/tokens.sqlite"
            let store = try TokenStore(path: path, appID: appID, options: options)
            for index in 0..<100 {
                try store.set(
                    SecretBytes(Workload.token(index)),
                    for: ItemKey(account: AccountID(Workload.account(index), service: Workload.service), kind: .generic))
            }
            return (path, store)
        }
        let whenUnlocked = TokenStore.Options(accessPolicy: .whenUnlocked)
        let (path, store) = try filled("session-lock-bench", whenUnlocked)
        let (_, plain) = try filled("session-lock-bench-plain", TokenStore.Options())

        /// Starts `gdbus call` of `method` on the mock (this thread goes on reading meanwhile);
        /// `finish` waits for it and returns the signal's time (CLOCK_MONOTONIC, ns).
        func signal(_ method: String) throws -> () throws -> UInt64 {
            let child = try ChildProcess.start(
                "/usr/bin/gdbus",
                ["call", "--system", "--dest", login1, "--object-path", session, "--method", "org.freedesktop.login1.Session.\(method)"],
                environment: childEnvironment(bus.environment))
            return {
                let termination = try child.wait(timeout: .seconds(20))
                let out = String(decoding: child.captured("stdout"), as: UTF8.self)
                guard termination.shellStatus == 0, let value = out.split(whereSeparator: { !$0.isNumber }).compactMap({ UInt64($0) }).last else {  // "(uint64 N,)"
                    throw TokenStoreError(.ioError, "gdbus call \(method) failed: \(out) \(String(decoding: child.captured("stderr"), as: UTF8.self))")
                }
                return value
            }
        }
        /// Reads until `done(read succeeded)`; the time of the read that ended it.
        func readUntil(_ done: (Bool) -> Bool) throws -> UInt64 {
            let deadline = monotonicNanos() + 10_000_000_000
            while monotonicNanos() < deadline {
                let succeeded: Bool
                do {
                    _ = try store.secret(for: key)
                    succeeded = true
                } catch TokenStoreError.storeLocked {
                    succeeded = false
                }
                let now = monotonicNanos()
                if done(succeeded) { return now }
            }
            throw TokenStoreError(.timedOut, "the store did not follow the session within 10 s")
        }

        var locked: [UInt64] = [], unlockRead: [UInt64] = [], coldOpen: [UInt64] = []
        _ = try store.secret(for: key)
        for _ in 0..<iterations {
            // gdbus runs beside this thread, which reads until the store follows the signal.
            let lock = try signal("TimedLock")
            let lockSeen = try readUntil { !$0 }
            let lockSent = try lock()
            locked.append(lockSeen > lockSent ? lockSeen - lockSent : 0)
            let unlock = try signal("TimedUnlock")
            let firstRead = try readUntil { $0 }
            let unlockSent = try unlock()
            unlockRead.append(firstRead > unlockSent ? firstRead - unlockSent : 0)

            let start = monotonicNanos()
            let cold = try TokenStore(path: path, appID: appID, options: whenUnlocked)
            _ = try cold.secret(for: key)
            coldOpen.append(monotonicNanos() - start)
            cold.close()
        }

        // A get under each policy, interleaved rounds of 500 (the session unlocked).
        var getPlain: [UInt64] = [], getWhenUnlocked: [UInt64] = []
        for _ in 0..<20 {
            for (target, samples) in [(plain, 0), (store, 1)] {
                for _ in 0..<500 {
                    let start = monotonicNanos()
                    _ = try target.secret(for: key)
                    let elapsed = monotonicNanos() - start
                    if samples == 0 { getPlain.append(elapsed) } else { getWhenUnlocked.append(elapsed) }
                }
            }
        }
        store.close()
        plain.close()

        func p50(_ samples: [UInt64]) -> Double { Double(samples.sorted()[samples.count / 2]) }
        func ms(_ nanos: Double) -> String { String(format: "%.2f", nanos / 1e6) }
        func us(_ nanos: Double) -> String { String(format: "%.1f", nanos / 1e3) }
        let maxLocked = Double(locked.max() ?? 0)
        print(
            "METRIC bench_session_lock source=logind-dbusmock signal_to_locked_p50_ms=\(ms(p50(locked))) "
                + "signal_to_locked_max_ms=\(ms(maxLocked)) goal_locked_ms=200 "
                + "unlock_read_p50_ms=\(ms(p50(unlockRead))) cold_open_read_p50_ms=\(ms(p50(coldOpen))) "
                + "ratio=\(String(format: "%.2f", p50(unlockRead) / p50(coldOpen))) goal_ratio=1.2 "
                + "get_after_first_unlock_p50_us=\(us(p50(getPlain))) get_when_unlocked_p50_us=\(us(p50(getWhenUnlocked))) "
                + "get_ratio=\(String(format: "%.2f", p50(getWhenUnlocked) / p50(getPlain))) iterations=\(iterations)")
    }
}
