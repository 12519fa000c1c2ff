import Foundation
import TokenStore

/// `tokenstore-testchild lock-wait STORE DIR`: opens the store and reads one item (the data key in
/// memory), creates DIR/ready; when DIR/go-lock appears, locks the store and creates DIR/locked;
/// exits when DIR/quit appears (each waited for 60 s at most). For the core scan after a lock.
func runLockWaitMode(_ args: [String]) throws {
    guard args.count >= 3 else { fail("lock-wait STORE DIR") }
    let directory = args[2]
    func touch(_ name: String) { _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data()) }
    func wait(for name: String) {
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: directory + "/" + name), Date() < deadline { usleep(10_000) }
    }
    let store = try TokenStore(path: args[1], appID: "dev.tokenstore.tests")
    _ = try store.items()
    touch("ready")
    wait(for: "go-lock")
    try store.lock()
    touch("locked")
    wait(for: "quit")
    withExtendedLifetime(store) {}
}
