import FoundationEssentials
import TokenStore

extension AuthorizationServerClient {
    /// Pushes an authorization request to the server's PAR endpoint (RFC 9126 §2): the
    /// parameters the authorization URL would carry, form-encoded in a POST (with the client's
    /// secret when it has one, and a DPoP proof when the client is DPoP-bound: RFC 9449 §10.1,
    /// the code is then bound to that key as with `dpop_jkt`). The answer's `request_uri`
    /// stands for them; the browser is given only `client_id` and `request_uri`.
    ///
    /// Not retried after the request may have reached the server beyond the retry policy's
    /// transient failures: a second push only makes another `request_uri`.
    /// - Throws: ``AuthSessionError`` — `authorizationMisconfigured` (the server refused the
    ///   request: `invalid_request`, `invalid_scope`, `unauthorized_client`, a bare 4xx), `invalidClient`,
    ///   `unexpectedResponse` (no usable `request_uri`), the network codes.
    func pushAuthorizationRequest(
        _ parameters: [(String, FormValue)], to endpoint: URL
    ) async throws(AuthSessionError) -> (requestURI: String, expiresIn: Duration) {
        var form = parameters
        if let secret = configuration.clientSecret { form.append(("client_secret", .secret(secret))) }
        let (responseClass, response) = await send(form: form, endpoint: .pushedAuthorization, to: endpoint)
        switch responseClass {
        case .success:
            guard let response, let object = ResponseClassifier.jsonObject(response.body),
                let requestURI = object["request_uri"]?.string, !requestURI.isEmpty, requestURI.utf8.count <= 2048,
                requestURI.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else {
                throw AuthSessionError(
                    .unexpectedResponse, "The pushed authorization request's answer has no usable request_uri.",
                    httpStatus: response?.status)
            }
            var lifetime: Int64 = 60
            if case .number(let seconds)? = object["expires_in"], seconds.isFinite, seconds > 0 {
                lifetime = Int64(min(seconds, 3600))
            }
            logger.info(
                "Authorization request pushed.",
                metadata: ["oauth.endpoint": Endpoint.pushedAuthorization.rawValue, "par.expires_s": "\(lifetime)"])
            return (requestURI, .seconds(lifetime))
        case .retryable(var error, let serverDelay):
            if let serverDelay { error.retryAfter = retryPolicy.capped(serverDelay: serverDelay) }
            throw error
        case .permanent(let error):
            throw error
        }
    }
}
