import FoundationEssentials

extension TokenStore {
    static func validate(_ key: ItemKey) throws {
        try validate(key.account)
    }

    static func validate(_ account: AccountID) throws {
        for (name, value) in [("service", account.service), ("account", account.name)] {
            guard !value.isEmpty else { throw TokenStoreError(.invalidInput, "The \(name) name is empty.") }
            guard value.utf8.count <= StoreLimits.maxIdentifierBytes else {
                throw TokenStoreError(.invalidInput, "The \(name) name is longer than \(StoreLimits.maxIdentifierBytes) bytes.")
            }
        }
    }

    static func validate(date: Date, what: String) throws {
        // Date's <= is !(>), true for NaN: test the number itself.
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, StoreLimits.dates.contains(date) else {
            throw TokenStoreError(.invalidInput, "The \(what) date is outside the years 1–9999.")
        }
    }

    static func validate(secret: SecretBytes, attributes: ItemAttributes) throws {
        guard secret.count > 0 else { throw TokenStoreError(.invalidInput, "The secret is empty.") }
        guard secret.count <= StoreLimits.maxSecretBytes else {
            throw TokenStoreError(.invalidInput, "The secret is larger than \(StoreLimits.maxSecretBytes) bytes.")
        }
        if let label = attributes.label, label.utf8.count > StoreLimits.maxLabelBytes {
            throw TokenStoreError(.invalidInput, "The label is longer than \(StoreLimits.maxLabelBytes) bytes.")
        }
        if let expiresAt = attributes.expiresAt { try validate(date: expiresAt, what: "expiry") }
        try validate(scopes: attributes.scopes)
    }

    static func validate(scopes: [String]) throws {
        guard scopes.count <= StoreLimits.maxScopes else {
            throw TokenStoreError(.invalidInput, "More than \(StoreLimits.maxScopes) scopes.")
        }
        for scope in scopes where scope.isEmpty || scope.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) || scope.utf8.count > 256 {
            throw TokenStoreError(.invalidInput, "A scope is empty, too long, or holds whitespace or control characters.")
        }
    }

    static func validate(_ key: AccessTokenKey) throws {
        try validate(key.account)
        if let audience = key.audience, audience.utf8.count > StoreLimits.maxIdentifierBytes {
            throw TokenStoreError(.invalidInput, "The audience is longer than \(StoreLimits.maxIdentifierBytes) bytes.")
        }
        try validate(scopes: key.scopes)
    }

    static func validate(userID: String) throws {
        guard !userID.isEmpty else { throw TokenStoreError(.invalidInput, "The user id is empty.") }
        guard userID.utf8.count <= StoreLimits.maxIdentifierBytes else {
            throw TokenStoreError(.invalidInput, "The user id is longer than \(StoreLimits.maxIdentifierBytes) bytes.")
        }
    }
}
