import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// What a lock leaves in memory: a core of a running child process (gdb's gcore, with
/// `dump-excluded-mappings on` so that the guarded `sodium_malloc` pages, which are kept out of
/// ordinary dumps, are in it too) holds the data key while the store is open, and no copy of it
/// after `lock()`. Not under a sanitizer (scripts/sanitizers sets TOKENSTORE_SANITIZE): an ASan
/// or TSan process maps terabytes of shadow memory, which `dump-excluded-mappings` would make
/// gcore write out (CI run 7: gdb gave up after 60 s); the scan runs uninstrumented in make test.
private let underSanitizer = ProcessInfo.processInfo.environment["TOKENSTORE_SANITIZE"] != nil

@Suite("The lock wipes the data key: core scan", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)), .disabled(if: underSanitizer, "a sanitizer's shadow memory makes the core terabytes; the scan runs in make test"))
struct LockCoreScanTests {
    private func count(_ needle: [UInt8], in data: Data) -> Int {
        var found = 0
        var range = data.startIndex..<data.endIndex
        while let hit = data.range(of: Data(needle), in: range) {
            found += 1
            range = hit.upperBound..<data.endIndex
        }
        return found
    }

    private func core(of pid: pid_t, into path: String) throws -> Data {
        let gdb = try ChildProcess.run(
            "/usr/bin/gdb", ["-q", "-batch", "-p", "\(pid)", "-ex", "set dump-excluded-mappings on", "-ex", "gcore \(path)"],
            timeout: .seconds(60))
        #expect(gdb.termination.code == 0, "\(gdb.standardErrorText)")
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    @Test("gcore of a child: the data key is there before the lock, 0 copies after it")
    func noCopyAfterLock() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else {
            Issue.record("gdb (gcore) is not installed: make deps installs it")
            return
        }
        let f = try TestStore()
        try f.store.set(secret("s1"), for: key("alice", .generic))
        let material = f.store.connection.envelope.key.material.copyBytes()
        let signals = try TemporaryDirectory()
        func wait(for name: String) {
            let deadline = Date().addingTimeInterval(60)
            while !FileManager.default.fileExists(atPath: signals.appending(name).path), Date() < deadline { usleep(10_000) }
        }
        let child = try ChildProcess.start(
            try BuiltProducts.executable("tokenstore-testchild").path, ["lock-wait", f.path, signals.url.path],
            environment: childEnvironment())
        defer { _ = child.stop() }
        wait(for: "ready")
        let before = count(material, in: try core(of: child.pid, into: signals.appending("core-before").path))
        #expect(before >= 1, "the scan does not find the data key even while the store is open")
        _ = FileManager.default.createFile(atPath: signals.appending("go-lock").path, contents: Data())
        wait(for: "locked")
        let after = count(material, in: try core(of: child.pid, into: signals.appending("core-after").path))
        #expect(after == 0, "\(after) copies of the data key in the core after the lock")
        print("METRIC lock_core_scan copies_before=\(before) copies_after=\(after)")
        _ = FileManager.default.createFile(atPath: signals.appending("quit").path, contents: Data())
    }
}
