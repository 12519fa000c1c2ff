import AuthSession
import Foundation
import Testing
import TestSupport
import TokenStore

let sessionKeyringTrait = Testing.ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable, Comment(rawValue: PrivateKeyring.skipReason))

let sessionAppID = "dev.tokenstore.tests"

/// A fast retry policy for tests: the shapes of the real one, with short delays. The total-time
/// budget is wide so that on a slow or loaded machine (sanitizers, 2 cores) it never decides how
/// many attempts a test sees; tests of the budget itself use their own policy.
let fastPolicy = RetryPolicy(
    maximumAttempts: 3, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50),
    maximumRetryAfter: .seconds(5), maximumTotalTime: .seconds(30))

/// The real clocks, with every wait a ``RetryPolicy`` asks for written down: a test checks what
/// the policy chose to wait, not how long a loaded machine took to run it.
final class SleepLog: @unchecked Sendable {  // `requested` is guarded by `lock`
    private let lock = NSLock()
    private var requested: [Duration] = []

    /// The waits asked for so far, in order.
    var sleeps: [Duration] { lock.withLock { requested } }
    var total: Duration { sleeps.reduce(.zero, +) }

    /// The system clock whose `sleep` records each wait before making it.
    var clock: RetryClock {
        RetryClock(now: RetryClock.system.now, wallClock: RetryClock.system.wallClock) { [self] duration in
            lock.withLock { requested.append(duration) }
            try await RetryClock.system.sleep(duration)
        }
    }

    /// `policy` with this log's clock.
    func recording(_ policy: RetryPolicy) -> RetryPolicy {
        var copy = policy
        copy.clock = clock
        return copy
    }
}

/// One real authorization server, one store in a temporary directory (real keyring), one session.
final class SessionFixture: @unchecked Sendable {  // immutable after init
    let server: AuthorizationServer
    let directory: TemporaryDirectory
    let path: String
    let store: TokenStore
    let session: TokenSession

    init(policy: RetryPolicy = fastPolicy, clientID: String = AuthorizationServer.publicClientID, clientSecret: String? = nil) throws {
        server = try AuthorizationServer()
        directory = try TemporaryDirectory()
        path = directory.appending("store/tokens.sqlite").path
        store = try TokenStore(path: path, appID: sessionAppID)
        session = try Self.makeSession(store: store, server: server, policy: policy, clientID: clientID, clientSecret: clientSecret)
    }

    static func makeSession(
        store: TokenStore, server: AuthorizationServer, policy: RetryPolicy = fastPolicy,
        clientID: String = AuthorizationServer.publicClientID, clientSecret: String? = nil
    ) throws -> TokenSession {
        let configuration = try AuthorizationServerConfiguration(
            domain: server.baseURL, clientID: clientID, clientSecret: clientSecret.map { SecretBytes(utf8: $0) },
            requestTimeout: .seconds(5))
        return TokenSession(store: store, configuration: configuration, retryPolicy: policy)
    }

    /// Signs `account` in as `appleUserID` through the real token exchange.
    @discardableResult
    func signIn(
        _ account: String = "alice", appleUserID: String = "001122.apple.user",
        scopes: [String] = ["openid", "read:items", "write:items"], allowsUserChange: Bool = false
    ) async throws -> SignInResult {
        let code = try server.appleAuthorizationCode(for: appleUserID)
        return try await session.signInWithApple(
            authorizationCode: SecretBytes(utf8: code), appleUserID: appleUserID, account: AccountID(account), scopes: scopes,
            allowsUserChange: allowsUserChange)
    }

    func refreshToken(_ account: String = "alice") throws -> String? {
        try store.refreshToken(account: AccountID(account))?.stringValue()
    }
}

func expectAuthCode<T>(
    _ code: AuthSessionError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
    } catch let error as AuthSessionError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The store's error code inside an ``AuthSessionError/Code/storage`` error.
func storeCode(of error: AuthSessionError) -> TokenStoreError.Code? {
    if case .storage(let cause) = error.cause { return cause.code }
    return nil
}

func metric(_ name: String, _ fields: KeyValuePairs<String, CustomStringConvertible>) {
    let text = fields.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    print("METRIC \(name) \(text)")
}
