import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// `state_machine`: random, seeded sequences of sign-in, renewal (per audience, forced or
/// not), logout, local clearing, Apple revocation, lookups, server outages, process restarts
/// and kill -9 crashes, against the real server and the real keyring. After every step:
///
/// - per Apple user: `authorized` ⇔ one of its accounts holds a refresh token that is stored
///   AND active at the server (checked after `resumePendingRevocations` while the server is up;
///   only "stored" while it is down);
/// - `revoked` / `notFound` ⇒ no stored refresh token for the user; every stored refresh token
///   belongs to an account whose user is `authorized`;
/// - at the server, the active refresh tokens are exactly the stored ones (nothing left
///   unrevoked), up to the tokens orphaned by a kill -9 between the server's answer and the
///   commit of a renewal (the client never saw them; see RELIABILITY.md).
///
/// One exception is allowed and counted (`stale`): right after a kill -9 at
/// `renewal.afterServerAnswer` the server has rotated the token but the store still holds the
/// old one, so the user reads `authorized` with a dead token until a renewal that goes to the
/// network (`interactionRequired`, user `revoked`), a logout or a new sign-in replaces it. It is
/// allowed only while that very token is still the stored one.
///
/// Sizes: CI 6 sequences × 40 steps; `TOKENSTORE_SOAK=1` 60 × 150. Override with
/// `TOKENSTORE_SM_SEQUENCES` / `TOKENSTORE_SM_LENGTH`; reproduce with `SEED=`.
@Suite("State machine: random session sequences keep authorized ⇔ usable token", .serialized, sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct StateMachineTests {
    @Test("random sequences against the real server and keyring: 0 violations")
    func randomSequences() async throws {
        let env = ProcessInfo.processInfo.environment
        let soak = env["TOKENSTORE_SOAK"] == "1"
        let sequences = Int(env["TOKENSTORE_SM_SEQUENCES"] ?? "") ?? (soak ? 60 : 6)
        let length = Int(env["TOKENSTORE_SM_LENGTH"] ?? "") ?? (soak ? 150 : 40)
        let seed = UInt64(env["SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("state_machine: SEED=\(seed) sequences=\(sequences) length=\(length)")

        var totals = StateMachineRun.Totals()
        for index in 0..<sequences {
            let run = try StateMachineRun(seed: seed &+ UInt64(index))
            try await run.execute(steps: length)
            totals.add(run.totals)
            if run.totals.violations + run.totals.unexpected > 0 {
                Issue.record("sequence \(index) (SEED=\(seed) index \(index)): \(run.failures.prefix(10).joined(separator: "; "))")
            }
        }
        #expect(totals.violations == 0)
        #expect(totals.unexpected == 0)
        #expect(totals.checks == sequences * (length + 1))
        metric("state_machine", [
            "sequences": sequences, "length": length, "steps": totals.steps, "checks": totals.checks,
            "violations": totals.violations, "unexpected_errors": totals.unexpected, "crashes": totals.crashes,
            "restarts": totals.restarts, "outages": totals.outages, "stale": totals.stale,
            "steps_by_kind": totals.kindSummary, "SEED": seed,
        ])
    }
}

/// One sequence: a fresh server, store and session, and the model's few facts.
final class StateMachineRun {
    struct Totals {
        var steps = 0, checks = 0, violations = 0, unexpected = 0, crashes = 0, restarts = 0, outages = 0, stale = 0
        var kinds: [String: Int] = [:]

        mutating func add(_ other: Totals) {
            steps += other.steps
            checks += other.checks
            violations += other.violations
            unexpected += other.unexpected
            crashes += other.crashes
            restarts += other.restarts
            outages += other.outages
            stale += other.stale
            kinds.merge(other.kinds, uniquingKeysWith: +)
        }

        var kindSummary: String { kinds.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",") }
    }

    /// Account i is always signed in as user i; the last user never signs in.
    static let accounts = ["sm-acct-0", "sm-acct-1", "sm-acct-2"]
    static let users = ["sm-user-0", "sm-user-1", "sm-user-2", "sm-user-never"]
    /// The APIs renewals ask tokens for (nil: the tenant's default).
    static let audiences: [String?] = [nil, "https://notes.example.com/", "https://photos.example.com/"]
    static let crashPoints = [
        "logout.afterBegin", "logout.afterRevoke", "logout.afterRecord", "renewal.afterServerAnswer", "renewal.afterCommit",
    ]

    let fixture: SessionFixture
    var store: TokenStore
    var session: TokenSession
    var rng: SeededGenerator
    var serverUp = true
    /// Per account, the stored refresh token that the server rotated away before a kill -9 let
    /// the renewal commit (stale until the account's token changes).
    var staleTokens: [String: String] = [:]
    /// Refresh tokens active at the server that no store holds: issued but never seen (kill -9
    /// after the answer), or left unrevoked on purpose by `clearLocally`.
    var orphans = 0
    var totals = Totals()
    var failures: [String] = []
    var step = 0
    /// What happened, step by step (names only, no secrets), for the report of a failure.
    var trace: [String] = []

    init(seed: UInt64) throws {
        fixture = try SessionFixture()
        store = fixture.store
        session = fixture.session
        rng = SeededGenerator(seed: seed)
        // Short-lived access tokens: the child's `acquire` always refreshes (forceRefresh), and a
        // renewal with a small minimumTTL sometimes uses the cache.
        try fixture.server.configure(accessTokenTTL: 3)
    }

    func execute(steps: Int) async throws {
        try await check("start")
        for index in 0..<steps {
            step = index
            let kind = pickKind()
            totals.kinds[kind, default: 0] += 1
            try await perform(kind)
            totals.steps += 1
            try await check(kind)
        }
        if !serverUp { try restartServer() }
    }

    private func pickKind() -> String {
        let weights: [(String, Int)] = [
            ("signIn", 18), ("renew", 20), ("logout", 12), ("appleRevoked", 6), ("lookup", 8), ("serverToggle", 7),
            ("restart", 6), ("crash", 8), ("clear", 4),
        ]
        var roll = Int.random(in: 0..<weights.reduce(0) { $0 + $1.1 }, using: &rng)
        for (kind, weight) in weights {
            if roll < weight { return kind }
            roll -= weight
        }
        return "lookup"
    }

    private func randomAccount() -> Int { Int.random(in: 0..<Self.accounts.count, using: &rng) }

    private func perform(_ kind: String) async throws {
        switch kind {
        case "signIn":
            let i = randomAccount()
            // Sign-in over a live session of the account is not part of the model (see RELIABILITY.md).
            guard try store.refreshToken(account: AccountID(Self.accounts[i])) == nil else { return }
            trace.append("signIn(\(i))")
            do {
                // Offline, Apple's code is of no use: the exchange must fail and store nothing.
                let code = serverUp ? try fixture.server.appleAuthorizationCode(for: Self.users[i]) : "offline-apple-code"
                try await session.signInWithApple(
                    authorizationCode: SecretBytes(utf8: code), appleUserID: Self.users[i], account: AccountID(Self.accounts[i]),
                    scopes: ["openid", "read:items"])
            } catch {
                expectOffline(error, kind)
            }
        case "renew":
            let account = Self.accounts[randomAccount()]
            let force = Bool.random(using: &rng)
            let audience = Self.audiences[Int.random(in: 0..<Self.audiences.count, using: &rng)]
            trace.append("renew(\(account), \(audience ?? "default"), force: \(force))")
            do {
                _ = try await session.accessToken(
                    for: AccountID(account), audience: audience, minimumTTL: .seconds(1), forceRefresh: force)
            } catch let error as AuthSessionError where error.code == .interactionRequired {
                // No token, or the server refused it: the user must sign in.
            } catch {
                expectOffline(error, kind)
            }
        case "logout":
            let account = Self.accounts[randomAccount()]
            do {
                let outcome = try await session.logout(account: AccountID(account))
                trace.append("logout(\(account)) → \(outcome)")
            } catch { unexpected(kind, error) }
        case "appleRevoked":
            let u = Int.random(in: 0..<Self.users.count, using: &rng)
            trace.append("appleRevoked(\(u))")
            do { _ = try await session.logoutCoordinator.handleAppleCredentialRevoked(userID: Self.users[u]) } catch {
                unexpected(kind, error)
            }
        case "lookup":
            let account = Self.accounts[randomAccount()]
            _ = try store.ledger.cachedAccessTokens(account: AccountID(account)).first?.entry
            _ = try store.appleUserID(account: AccountID(account))
            _ = try store.pendingRevocations()
            _ = try session.accounts()
            let canRenew = try session.canRenew(account: AccountID(account))
            if canRenew != (try store.refreshToken(account: AccountID(account)) != nil) {
                violation("canRenew(\(account)) is \(canRenew) but the stored refresh token says otherwise", kind)
            }
        case "clear":
            // Removes the local entries without revoking: the token stays active at the server on
            // purpose, so it joins the tokens the store does not hold.
            let account = Self.accounts[randomAccount()]
            let held = try store.refreshToken(account: AccountID(account)) != nil
            do {
                let removed = try await session.clearLocally(account: AccountID(account))
                trace.append("clear(\(account)) → \(removed)")
                if held { orphans += 1 }
            } catch { unexpected(kind, error) }
        case "serverToggle":
            if serverUp {
                fixture.server.stopTemporarily()
                serverUp = false
                totals.outages += 1
                trace.append("server down")
            } else {
                try restartServer()
                trace.append("server up")
            }
        case "restart":
            trace.append("restart")
            try await restartProcess()
        case "crash":
            try await crashChild()
        default:
            Issue.record("unknown step \(kind)")
        }
    }

    private func restartServer() throws {
        try fixture.server.restart()
        try fixture.server.configure(accessTokenTTL: 3)
        serverUp = true
    }

    /// Models an app restart: a new store object over the same file, a new session, and the
    /// start-up call to resume pending revocations (made whether the server is up or not).
    private func restartProcess() async throws {
        store.close()
        store = try TokenStore(path: fixture.path, appID: sessionAppID)
        session = try SessionFixture.makeSession(store: store, server: fixture.server)
        totals.restarts += 1
        // What an app does at start-up, online or not.
        do { _ = try await session.logoutCoordinator.resumePendingRevocations() } catch { unexpected("resume", error) }
    }

    /// A real child process runs a logout or a renewal and is SIGKILLed at a crash point.
    private func crashChild() async throws {
        let point = Self.crashPoints[Int.random(in: 0..<Self.crashPoints.count, using: &rng)]
        let account = Self.accounts[randomAccount()]
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let url = fixture.server.baseURL.absoluteString
        let arguments = point.hasPrefix("logout") ? ["logout", fixture.path, url, account] : ["acquire", fixture.path, url, account, "1", "force"]
        let result = try runChild(child, arguments, environment: ["TOKENSTORE_CRASH_POINT": point], timeout: 60)
        let died = result.diedAtCrashPoint(point)
        trace.append("crash(\(point), \(account)) killed=\(died) out=\(result.stdout.prefix(80))")
        if died {
            totals.crashes += 1
            if point == "renewal.afterServerAnswer" { orphans += 1 }
        } else if result.signaled || result.status != 0 {
            unexpected("crash(\(point))", "child exited \(result.status): \(result.stderr.suffix(300))")
        }
        try await restartProcess()
        if died, point == "renewal.afterServerAnswer" {
            staleTokens[account] = try store.refreshToken(account: AccountID(account))?.stringValue()
        }
    }

    private func expectOffline(_ error: any Error, _ kind: String) {
        if let error = error as? AuthSessionError, !serverUp,
            [.notConnectedToInternet, .timedOut].contains(error.code)
        {
            return
        }
        unexpected(kind, error)
    }

    private func unexpected(_ kind: String, _ error: Any) {
        totals.unexpected += 1
        failures.append("step \(step) \(kind): unexpected \(error)")
    }

    private func violation(_ what: String, _ kind: String) {
        totals.violations += 1
        failures.append("step \(step) after \(kind): \(what) [trace: \(trace.suffix(8).joined(separator: " | "))]")
    }

    /// The invariant.
    private func check(_ kind: String) async throws {
        totals.checks += 1
        if serverUp {
            do {
                _ = try await session.logoutCoordinator.resumePendingRevocations(now: Date() + 86_400)
            } catch {
                unexpected("resume before check", error)
            }
        }
        var storedActive = 0
        var storedAccounts: Set<String> = []
        for (index, user) in Self.users.enumerated() {
            let state = try store.credentialState(forUserID: user)
            let accounts = try store.accounts(forAppleUserID: user).map(\.name)
            var stored = false
            var usable = false
            var staleHere = false
            for account in accounts {
                guard let token = try store.refreshToken(account: AccountID(account))?.stringValue() else { continue }
                stored = true
                storedAccounts.insert(account)
                if serverUp {
                    if try fixture.server.introspect(token).active {
                        usable = true
                        storedActive += 1
                    } else if staleTokens[account] == token {
                        staleHere = true
                    }
                } else {
                    usable = true
                }
            }
            if index < Self.accounts.count, accounts.contains(where: { $0 != Self.accounts[index] }) {
                violation("user \(index) is bound to another account", kind)
            }
            switch state {
            case .authorized:
                if !usable {
                    if staleHere { totals.stale += 1 } else { violation("user \(index) authorized without a usable refresh token (stored: \(stored))", kind) }
                }
            case .revoked, .notFound:
                if stored { violation("user \(index) is \(state) but a refresh token is stored", kind) }
            }
        }
        // Every stored refresh token belongs to an account with an Apple user id.
        for account in Self.accounts where !storedAccounts.contains(account) {
            if try store.refreshToken(account: AccountID(account)) != nil {
                violation("\(account) holds a refresh token without a known user", kind)
            }
        }
        // Nothing left unrevoked at the server.
        if serverUp {
            let active = try fixture.server.stats().activeRefreshTokens
            if active < storedActive || active > storedActive + orphans {
                violation("server has \(active) active refresh tokens, store holds \(storedActive) (orphans \(orphans))", kind)
            }
        }
    }
}
