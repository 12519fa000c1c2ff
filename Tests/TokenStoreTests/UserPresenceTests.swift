import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// The userPresence access policy: a read of a gated secret first asks polkit
/// (`CheckAuthorization` for `<app id>.tokenstore.read`, with user interaction), and within the
/// policy's window asks no more. On the real gnome-keyring of scripts/with-keyring.
///
/// Stand-in: python3-dbusmock's `polkitd` template on a private system bus (a dbus-daemon of
/// the test's own; the store is pointed at it through `Options.polkitBusAddress`, tokenctl children
/// through DBUS_SYSTEM_BUS_ADDRESS). Not the real polkitd: polkitd 122 reads its actions and
/// rules only from the system's directories (/usr/share/polkit-1/actions, /etc/polkit-1/rules.d;
/// it has no option to read a test's), so a test would have to install files there, and
/// `auth_self` needs an authentication agent answering with the user's password. The mock
/// records every call (`GetMethodCalls`), which is how the prompts are counted. The real
/// polkitd runs too, in a mount namespace of its own (``RealPolkitPresenceTests``).
@Suite("User presence through polkit (dbusmock polkitd stand-in)", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct UserPresenceTests {
    static let action = "dev.tokenstore.tests.tokenstore.read"
    static let authority = "/org/freedesktop/PolicyKit1/Authority"
    static let name = "org.freedesktop.PolicyKit1"

    /// A private system bus with dbusmock's polkitd on it.
    struct Polkit {
        let bus: PrivateBus
        let mock: DBusMock

        init() throws {
            bus = try PrivateBus()
            mock = try DBusMock(template: "polkitd", name: UserPresenceTests.name, bus: .system, environment: bus.environment)
        }

        func allow(_ allowed: Bool) throws {
            try mock.call(name, authority, "org.freedesktop.DBus.Mock.SetAllowed", [allowed ? "['\(action)']" : "@as []"])
        }

        /// Holds every CheckAuthorization unanswered from now on, and records
        /// CancelCheckAuthorization (the template has none: added as a method that does nothing).
        func holdChecks() throws {
            try mock.call(name, authority, "org.freedesktop.DBus.Mock.AddMethod", [
                "org.freedesktop.PolicyKit1.Authority", "CancelCheckAuthorization", "s", "", ""])
            try mock.call(name, authority, "org.freedesktop.DBus.Mock.SimulateHang", ["true"])
        }

        /// Waits until the mock holds a check.
        func waitForHeldCheck() throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while try !mock.call(name, authority, "org.freedesktop.DBus.Mock.HaveHangingCalls").contains("true") {
                guard ContinuousClock.now < deadline else { throw StandInFailed(what: "no CheckAuthorization reached the mock") }
                usleep(10_000)
            }
        }

        /// The cancellation ids (`tokenstore-PID-N`) of the calls of `method` so far, in order.
        func cancellationIDs(_ method: String) throws -> [String] {
            let out = try mock.call(name, authority, "org.freedesktop.DBus.Mock.GetMethodCalls", [method])
            let pattern = try NSRegularExpression(pattern: "'(tokenstore-[0-9]+-[0-9]+)'")
            return pattern.matches(in: out, range: NSRange(out.startIndex..., in: out)).map { String(out[Range($0.range(at: 1), in: out)!]) }
        }

        /// The CheckAuthorization calls so far (the mock's record).
        func checks() throws -> [String] {
            let out = try mock.call(name, authority, "org.freedesktop.DBus.Mock.GetMethodCalls", ["CheckAuthorization"])
            return out.components(separatedBy: "'unix-process'").dropFirst().map { $0 }
        }
    }

    /// A store holding a refresh token, a generic item and a cached access token for `alice`,
    /// reopened under `policy`, asking `polkit`.
    private func store(_ policy: AccessPolicy, _ polkit: Polkit, alsoFor: Set<ItemKind> = []) throws -> (TestStore, TokenStore) {
        let f = try TestStore()
        try f.store.ledger.saveSignIn(
            account: AccountID("alice"), refreshToken: secret("rt-alice"), appleUserID: "000111.alice",
            accessToken: AccessTokenEntry(token: secret("at-alice"), expiresAt: Date() + 3600, scopes: ["read"]))
        try f.store.set(secret("g-alice"), for: key("alice", .generic))
        f.store.close()
        var options = TokenStore.Options(accessPolicy: policy)
        options.polkitBusAddress = polkit.bus.address
        options.userPresenceAlsoFor = alsoFor
        options.userPresenceTimeout = .seconds(5)
        return (f, try TokenStore(path: f.path, appID: testAppID, options: options))
    }

    @Test("authorized: the read goes on after one CheckAuthorization for this process (unix-process pid, start-time, uid; the app's action; AllowUserInteraction)")
    func authorizedRead() throws {
        let polkit = try Polkit()
        try polkit.allow(true)
        let (_, store) = try store(.userPresence(.always), polkit)
        #expect(try polkit.checks().isEmpty, "the open asked polkit")
        #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice"))
        let checks = try polkit.checks()
        #expect(checks.count == 1)
        let call = checks.first ?? ""
        #expect(call.contains("'pid': <uint32 \(getpid())>"), "\(call)")
        #expect(call.contains("'uid': <\(getuid())>") || call.contains("'uid': <int32 \(getuid())>"), "\(call)")
        #expect(call.contains("'start-time': <uint64 \(PolkitAuthority.processStartTime())>") && PolkitAuthority.processStartTime() > 0, "\(call)")
        #expect(call.contains("'\(Self.action)'"), "\(call)")
        #expect(call.contains("<uint32 1>"), "AllowUserInteraction: \(call)")
        #expect(store.accessPolicy == .userPresence(.always))
        #expect(PolkitAuthority.actionID(appID: "com.Example.My_App") == "com.example.my-app.tokenstore.read")
    }

    @Test(".session(300): 20 reads (refresh token and generic item, two store objects) cost exactly one CheckAuthorization")
    func sessionWindowOneCheck() throws {
        let polkit = try Polkit()
        try polkit.allow(true)
        let (f, store) = try store(.userPresence(.session(seconds: 300)), polkit)
        var options = TokenStore.Options()
        options.polkitBusAddress = polkit.bus.address
        let second = try TokenStore(path: f.path, appID: testAppID, options: options)  // the recorded policy applies
        for index in 0..<20 {
            let reader = index % 2 == 0 ? store : second
            if index % 4 < 2 {
                #expect(try reader.refreshToken(account: AccountID("alice")) == secret("rt-alice"))
            } else {
                #expect(try reader.secret(for: key("alice", .generic)) == secret("g-alice"))
            }
        }
        let count = try polkit.checks().count
        print("METRIC user_presence policy=session:300 reads=20 checks=\(count)")
        #expect(count == 1)
    }

    @Test(".always: every read asks (10 reads, 10 checks)")
    func alwaysAsks() throws {
        let polkit = try Polkit()
        try polkit.allow(true)
        let (_, store) = try store(.userPresence(.always), polkit)
        for _ in 0..<10 { #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice")) }
        let count = try polkit.checks().count
        print("METRIC user_presence policy=always reads=10 checks=\(count)")
        #expect(count == 10)
    }

    @Test("the window expires: .appLifecycle(2) asks again after 2 s, not before")
    func windowExpires() throws {
        let polkit = try Polkit()
        try polkit.allow(true)
        let (_, store) = try store(.userPresence(.appLifecycle(seconds: 2)), polkit)
        #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice"))
        #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice"))
        #expect(try polkit.checks().count == 1)
        Thread.sleep(forTimeInterval: 2.2)
        #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice"))
        #expect(try polkit.checks().count == 2)
    }

    @Test("denied: userPresenceDenied, nothing read or changed; the renewal's read is refused and the tokens stay")
    func deniedChangesNothing() throws {
        let polkit = try Polkit()
        try polkit.allow(false)
        let (f, store) = try store(.userPresence(.session(seconds: 300)), polkit)
        // The database and its WAL (a read may touch the -shm's read marks, which hold no data).
        func files() -> [Data?] { [f.path, f.path + "-wal"].map { FileManager.default.contents(atPath: $0) } }
        let before = files()
        let itemCount = try store.items().count
        #expect(throws: TokenStoreError.userPresenceDenied) { _ = try store.secret(for: key("alice", .generic)) }
        #expect(throws: TokenStoreError.userPresenceDenied) { _ = try store.item(for: key("alice", .refreshToken)) }
        #expect(throws: TokenStoreError.userPresenceDenied) { _ = try store.boundRefreshToken(account: AccountID("alice")) }
        #expect(throws: TokenStoreError.userPresenceDenied) { try store.setAccessPolicy(.afterFirstUnlock) }
        #expect(files() == before, "a denied read changed the store's files")
        #expect(try store.items().count == itemCount && itemCount >= 3, "metadata is not gated, and nothing was removed")
        #expect(try polkit.checks().count == 4)
        // Allowed now: the same reads go on, the tokens were kept.
        try polkit.allow(true)
        #expect(try store.boundRefreshToken(account: AccountID("alice"))?.token == secret("rt-alice"))
        #expect(try store.secret(for: key("alice", .generic)) == secret("g-alice"))
    }

    @Test("a cached access token is read without asking unless the app asks (userPresenceAlsoFor: [.accessToken])")
    func accessTokenNotGatedByDefault() throws {
        let polkit = try Polkit()
        try polkit.allow(false)
        let (_, store) = try store(.userPresence(.always), polkit)
        let cacheKey = AccessTokenKey(account: AccountID("alice"), audience: nil, scopes: ["read"])
        #expect(try store.ledger.cachedAccessToken(cacheKey)?.token == secret("at-alice"))
        #expect(try store.ledger.cachedAccessTokens(account: AccountID("alice")).count == 1)
        #expect(try polkit.checks().isEmpty)
        let (_, gated) = try self.store(.userPresence(.always), polkit, alsoFor: [.accessToken])
        #expect(throws: TokenStoreError.userPresenceDenied) { _ = try gated.ledger.cachedAccessToken(cacheKey) }
        #expect(try polkit.checks().count == 1)
    }

    @Test("no polkit on the system bus: lockSourceUnavailable (69) at the read, not at open")
    func noPolkit() throws {
        let bus = try PrivateBus()
        let f = try TestStore()
        try f.store.set(secret("g-alice"), for: key("alice", .generic))
        f.store.close()
        var options = TokenStore.Options(accessPolicy: .userPresence(.always))
        options.polkitBusAddress = bus.address
        let store = try TokenStore(path: f.path, appID: testAppID, options: options)
        #expect(throws: TokenStoreError.lockSourceUnavailable) { _ = try store.secret(for: key("alice", .generic)) }
        #expect(try store.items().count == 1)
    }

    @Test("polkit does not answer in time: timedOut, the check cancelled")
    func timeOut() throws {
        let polkit = try Polkit()
        try polkit.mock.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.SimulateHang", ["true"])
        let (f, _) = try store(.userPresence(.always), polkit)
        var options = TokenStore.Options()
        options.polkitBusAddress = polkit.bus.address
        options.userPresenceTimeout = .milliseconds(500)
        let short = try TokenStore(path: f.path, appID: testAppID, options: options)
        let started = ContinuousClock.now
        #expect(throws: TokenStoreError.timedOut) { _ = try short.secret(for: key("alice", .generic)) }
        #expect(ContinuousClock.now - started < .seconds(3))
    }

    @Test("an async read cancelled while polkit holds its check: CancelCheckAuthorization with the check's cancellation id, cancelled at once (not at the time-out), nothing read, no proof left")
    func cancelledReadCancelsTheCheck() async throws {
        let polkit = try Polkit()
        try polkit.allow(true)  // were the held check answered, it would say yes
        try polkit.holdChecks()
        let (_, store) = try store(.userPresence(.always), polkit)  // userPresenceTimeout: 5 s
        let read = Task { try await store.onBlockingExecutor { try $0.refreshToken(account: AccountID("alice")) } }
        try polkit.waitForHeldCheck()
        let cancelled = ContinuousClock.now
        read.cancel()
        await #expect(throws: TokenStoreError.cancelled) { _ = try await read.value }
        #expect(ContinuousClock.now - cancelled < .seconds(2), "the read waited for the time-out, not the cancellation")
        let asked = try polkit.cancellationIDs("CheckAuthorization")
        #expect(asked.count == 1)
        #expect(try polkit.cancellationIDs("CancelCheckAuthorization") == asked, "polkit was not told to cancel the check it holds")
        // The held check answered after all (yes): it reaches nobody, and leaves no proof.
        try polkit.mock.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.ReleaseHangingCalls")
        try polkit.mock.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.SimulateHang", ["false"])
        try polkit.allow(false)
        #expect(throws: TokenStoreError.userPresenceDenied) { _ = try store.refreshToken(account: AccountID("alice")) }
        // A task cancelled before its read asks nothing.
        let early = Task {
            while !Task.isCancelled { await Task.yield() }
            return try await store.onBlockingExecutor { try $0.refreshToken(account: AccountID("alice")) }
        }
        early.cancel()
        await #expect(throws: TokenStoreError.cancelled) { _ = try await early.value }
        #expect(try polkit.cancellationIDs("CheckAuthorization").count == 2)
    }

    @Test("tokenctl: .session shares one proof across processes; .appLifecycle asks in each; status shows the policy")
    func tokenctlSessionAcrossProcesses() throws {
        let polkit = try Polkit()
        // tokenctl --store PATH uses the app id it derives from the path (the folder's name: "store").
        try polkit.mock.call(Self.name, Self.authority, "org.freedesktop.DBus.Mock.SetAllowed", ["['store.tokenstore.read']"])
        let tokenctl = try BuiltProducts.executable("tokenctl")
        for (policy, expected) in [("userPresence:session:300", 1), ("userPresence:appLifecycle:300", 3)] {
            let directory = try TemporaryDirectory()
            let path = directory.appending("store/tokens.sqlite").path
            func run(_ arguments: [String], stdin: String? = nil) throws -> ChildResult {
                try runChild(tokenctl, ["--store", path] + arguments, environment: polkit.bus.environment, stdin: stdin.map { Data($0.utf8) })
            }
            let before = try polkit.checks().count
            let put = try run(["put", "--account", "alice", "--kind", "generic", "--access-policy", policy], stdin: "s1")
            #expect(put.status == 0, "\(put.stderr)")
            for _ in 0..<3 {
                let get = try run(["get", "--account", "alice", "--kind", "generic", "--reveal"])
                #expect(get.status == 0 && get.stdout.contains("s1"), "\(get.status) \(get.stderr)")
            }
            let status = try run(["--json", "status"])
            #expect(status.stdout.contains(policy), "\(status.stdout)")
            let count = try polkit.checks().count - before
            print("METRIC user_presence policy=\(policy) processes=3 checks=\(count)")
            #expect(count == expected, "\(policy)")
        }
        #expect(try polkit.checks().allSatisfy { $0.contains("'store.tokenstore.read'") })
        // Denied in a child: exit 75, userPresenceDenied.
        try polkit.allow(false)
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let put = try runChild(tokenctl, ["--store", path, "put", "--account", "alice", "--kind", "generic", "--access-policy", "userPresence"],
                               environment: polkit.bus.environment, stdin: Data("s1".utf8))
        #expect(put.status == 0, "\(put.stderr)")
        let denied = try runChild(tokenctl, ["--store", path, "get", "--account", "alice", "--kind", "generic"], environment: polkit.bus.environment)
        #expect(denied.status == 75 && denied.stderr.contains("userPresenceDenied"), "\(denied.status) \(denied.stderr)")
    }
}

/// The real polkitd (``RealPolkit``: a mount namespace of its own where a test folder is bind-mounted
/// over its action and rules directories, a private system bus, a rules file answering yes or
/// no) checking tokenctl run as uid 65534 (polkit authorizes root for everything, so the
/// reader is another user; its store is a passphrase store, the keyring being root's).
/// Needs root and `unshare -m`; without them it is skipped, saying why.
@Suite("User presence through the real polkitd (rules file, uid 65534)", .serialized, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)), .enabled(if: RealPolkit.unavailableReason == nil, Comment(rawValue: RealPolkit.unavailableReason ?? "")))
struct RealPolkitPresenceTests {
    @Test("session:300 → 3 processes, 1 check, subject seen as uid 65534 (not root); denied → 75 and the policy cannot be lowered; userPresence (always) → a check per read")
    func realPolkitd() throws {
        // tokenctl --store …/store/tokens.sqlite uses the app id "store": its action is store.tokenstore.read.
        let polkit = try RealPolkit(
            action: "store.tokenstore.read", actionFile: PolkitActionFile.text(appID: "store", appName: "Store"))
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let passphrase = "\(polkit.directory)/home/passphrase"
        try "correct horse battery staple\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        chown(passphrase, 65534, 65534)
        chmod(passphrase, 0o600)
        func run(_ store: String, _ arguments: [String], stdin: String? = nil) throws -> ChildResult {
            try polkit.runAsOtherUser(
                tokenctl, ["--store", "\(polkit.directory)/home/\(store)/store/tokens.sqlite", "--passphrase-fd", "3"] + arguments,
                passphraseFile: passphrase, stdin: stdin.map { Data($0.utf8) })
        }
        let get = ["get", "--account", "alice", "--kind", "generic", "--reveal"]
        let put = try run("a", ["put", "--account", "alice", "--kind", "generic", "--access-policy", "userPresence:session:300"], stdin: "s1")
        #expect(put.status == 0, "\(put.stderr)")
        for _ in 0..<3 {
            let read = try run("a", get)
            #expect(read.status == 0 && read.stdout.contains("s1"), "\(read.status) \(read.stderr)")
        }
        let checks = polkit.checks()
        print("METRIC user_presence polkit=real policy=userPresence:session:300 processes=3 checks=\(checks.count)")
        #expect(checks.count == 1)
        #expect(checks.allSatisfy { $0.hasSuffix(" nobody") }, "polkit saw another subject than uid 65534: \(checks)")

        // Denied, and the login session's proof gone: 75, nothing read; lowering the policy is denied too.
        try polkit.answer(false)
        try? FileManager.default.removeItem(atPath: "\(polkit.directory)/home/run/tokenstore")
        let denied = try run("a", get)
        #expect(denied.status == 75 && denied.stderr.contains("userPresenceDenied") && !denied.stdout.contains("s1"), "\(denied.status) \(denied.stderr)")
        let lower = try run("a", ["policy", "set", "afterFirstUnlock"])
        #expect(lower.status == 75 && lower.stderr.contains("userPresenceDenied"), "\(lower.status) \(lower.stderr)")
        let status = try run("a", ["--json", "status"])
        #expect(status.stdout.contains("userPresence:session:300"), "\(status.stdout)")
        #expect(polkit.checks().count == 3)

        // userPresence (always): a check per read.
        try polkit.answer(true)
        #expect(try run("b", ["put", "--account", "alice", "--kind", "generic", "--access-policy", "userPresence"], stdin: "s2").status == 0)
        for _ in 0..<3 { #expect(try run("b", get).status == 0) }
        print("METRIC user_presence polkit=real policy=userPresence reads=3 checks=\(polkit.checks().count - 3)")
        #expect(polkit.checks().count == 6)

        // An app whose action is not installed: polkit answers "Action … is not registered": 69, nothing read.
        let other = ["--store", "\(polkit.directory)/home/c/other/tokens.sqlite", "--passphrase-fd", "3"]
        let otherPut = try polkit.runAsOtherUser(
            tokenctl, other + ["put", "--account", "alice", "--kind", "generic", "--access-policy", "userPresence"],
            passphraseFile: passphrase, stdin: Data("s3".utf8))
        #expect(otherPut.status == 0, "\(otherPut.stderr)")
        let unregistered = try polkit.runAsOtherUser(tokenctl, other + get, passphraseFile: passphrase)
        #expect(unregistered.status == 69 && unregistered.stderr.contains("not registered") && unregistered.stderr.contains("other.tokenstore.read")
                && !unregistered.stdout.contains("s3"), "\(unregistered.status) \(unregistered.stderr)")
    }
}
