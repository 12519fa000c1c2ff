import FoundationEssentials
import TokenStore

extension AuthorizationServerClient {
    /// Where a refresh token bound to `bound` is sent (renewal) or revoked.
    ///
    /// A token goes where it was issued: the endpoints recorded, sealed, when it was stored.
    /// - `nil` (a token stored before endpoints were recorded, or a code exchange): the server's
    ///   current endpoints.
    /// - Endpoints of another issuer than this configuration's: those, never this server's (a
    ///   token is not handed to a server that did not issue it).
    /// - The current endpoints, when they agree; when they do not, the server itself is asked
    ///   now (over TLS, or loopback): a document fetched now that still names other endpoints
    ///   means the server moved them, which is followed, logged and kept on record for
    ///   `tokenctl status`; a copy is never enough to redirect a session, and when the server
    ///   cannot be asked the recorded endpoints are used.
    /// - Throws: ``AuthSessionError`` only when nothing is recorded and the current endpoints
    ///   cannot be had (`notConnectedToInternet`, `insecureConfiguration`, `storage`, …).
    func endpoints(boundTo bound: ServerEndpoints?) async throws(AuthSessionError) -> ServerEndpoints {
        guard let bound else { return ServerEndpoints(issuer: configuration.issuer, try await discovery.metadata()) }
        guard bound.issuer == configuration.issuer else {
            logger.info("The token was issued by another server than the one configured; it goes back to that server only.")
            return bound
        }
        guard configuration.usesDiscovery else { return bound }
        let current: ServerEndpoints
        do {
            current = ServerEndpoints(issuer: configuration.issuer, try await discovery.metadata())
        } catch let error where error.code != .storage {
            return bound
        }
        guard current != bound else { return bound }
        let fresh: ServerEndpoints
        do {
            fresh = ServerEndpoints(issuer: configuration.issuer, try await discovery.fetched().metadata)
        } catch let error where error.code != .storage {
            logger.info("The kept discovery document names other endpoints than the token's; the server could not be asked, the token's are used.")
            return bound
        }
        guard fresh != bound else { return bound }
        logger.info(
            "The server moved its endpoints since the token was issued (its document fetched now says so); following it.",
            metadata: ["endpoints.changed": fresh.token != bound.token ? "token" : "revocation"])
        return fresh
    }
}
