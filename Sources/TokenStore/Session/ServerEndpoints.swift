import FoundationEssentials

/// Where a refresh token may go: the issuer that issued it and the token and revocation
/// endpoints it was issued with, recorded sealed with the token (in its item, then in its
/// outbox entry) so that renewal and logout send it there and nowhere else. For `AuthSession`:
/// the URLs are opaque strings here.
package struct ServerEndpoints: Sendable, Equatable {
    /// The server's issuer, exactly as configured.
    package let issuer: String
    /// Where the token is renewed.
    package let token: String
    /// Where it is revoked; `nil`: the server had no revocation endpoint.
    package let revocation: String?

    package init(issuer: String, token: String, revocation: String?) {
        self.issuer = issuer
        self.token = token
        self.revocation = revocation
    }

    /// The endpoints sealed in `fields`, or `nil` when none are (a token stored before schema 13,
    /// or by the item API).
    init?(_ fields: RecordFields) {
        guard let issuer = fields.string(.issuer), let token = fields.string(.tokenEndpoint) else { return nil }
        self.init(issuer: issuer, token: token, revocation: fields.string(.revocationEndpoint))
    }

    /// Adds these endpoints to `fields`.
    func add(to fields: inout RecordFields) {
        fields.set(.issuer, issuer)
        fields.set(.tokenEndpoint, token)
        if let revocation { fields.set(.revocationEndpoint, revocation) }
    }

    /// Checks the sizes the store accepts (every URL at most 2,048 bytes, none empty).
    /// - Throws: `invalidInput`.
    func validate() throws {
        for text in [issuer, token] + (revocation.map { [$0] } ?? []) where text.isEmpty || text.utf8.count > 2048 {
            throw TokenStoreError(.invalidInput, "A server endpoint is empty or longer than 2,048 bytes.")
        }
    }
}

/// An authorization server's discovery document as the session layer fetched it, kept sealed
/// in the store (``DiscoveryRecord``): the bytes exactly as they came, so that a copy read back
/// is checked as a fetched one is. Opaque to the store.
package struct ServerDocument: Sendable {
    /// The issuer the document was fetched for (as configured).
    package let issuer: String
    /// The OpenID Connect discovery document's bytes.
    package let document: [UInt8]
    /// The RFC 8414 metadata document that supplied a revocation endpoint the first one lacked.
    package let supplement: [UInt8]?
    /// When it was fetched.
    package let fetchedAt: Date
    /// The endpoints of the document this one replaced, when they differed, and when that was
    /// found: the server moved its endpoints (shown by `tokenctl status`).
    package let previousEndpoints: ServerEndpoints?
    package let changedAt: Date?

    package init(
        issuer: String, document: [UInt8], supplement: [UInt8]?, fetchedAt: Date,
        previousEndpoints: ServerEndpoints? = nil, changedAt: Date? = nil
    ) {
        self.issuer = issuer
        self.document = document
        self.supplement = supplement
        self.fetchedAt = fetchedAt
        self.previousEndpoints = previousEndpoints
        self.changedAt = changedAt
    }
}
