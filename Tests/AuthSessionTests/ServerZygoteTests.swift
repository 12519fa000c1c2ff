import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import TestTraits
import Testing

/// The test authorization servers start by fork from one process that has done the Python imports
/// (Tests/AuthServer/zygote.py, TestSupport's ServerZygote): a forked server must be the same server
/// as `python server.py`, with its own key and state, and gone when stopped.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ServerZygoteTests {
    @Test("servers are forked by the zygote: each has its own signing key, keeps it across a restart, and is gone when stopped")
    func forkedServers() async throws {
        let a = try AuthorizationServer(logRequests: false)
        let b = try AuthorizationServer(logRequests: false)
        // A zygote that cannot start makes every server a `python server.py` again: slower, silently.
        #expect(a.forkedByZygote == AuthorizationServer.zygoteWanted)
        #expect(b.forkedByZygote == AuthorizationServer.zygoteWanted)
        let keyA = try await Self.signingKeyID(a)
        #expect(try await Self.signingKeyID(b) != keyA)

        a.stopTemporarily()
        #expect(!a.isRunning)
        await #expect(throws: (any Error).self) { try await Self.signingKeyID(a) }
        try a.restart()
        #expect(a.isRunning)
        #expect(try await Self.signingKeyID(a) == keyA)

        a.stop()
        #expect(!a.isRunning)
        #expect(b.isRunning)
        b.stop()
        #expect(!b.isRunning)
    }

    private static func signingKeyID(_ server: AuthorizationServer) async throws -> String {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let (data, _) = try await session.data(from: server.jwksURL)
        let keys = try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["keys"] as? [[String: Any]])
        return try #require(keys.first?["kid"] as? String)
    }
}
