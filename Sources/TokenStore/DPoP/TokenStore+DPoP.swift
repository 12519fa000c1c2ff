import FoundationEssentials

/// Where a DPoP private key lives: the tag the store keeps beside the key's material (its raw
/// value is written to the store), and what AuthSession's DPoP keys answer as their residence.
package enum DPoPKeyResidence: String, Sendable, Equatable {
    /// In this process's memory, sealed in the store at rest.
    case software
    /// Inside the TPM; only its sealed blob is kept.
    case tpm
}

/// A DPoP key's material as the store keeps it: opaque bytes (a software key's scalar and
/// point, or a TPM's sealed blob) tagged with where the key lives. Sealed under the data key.
package struct DPoPKeyMaterial: Sendable {
    /// Where the key lives, which says how to read ``bytes``.
    package let residence: DPoPKeyResidence
    /// The material; the caller wipes what it copies out.
    package let bytes: SecretBytes

    /// Material for a key living at `residence`.
    package init(residence: DPoPKeyResidence, bytes: SecretBytes) {
        self.residence = residence
        self.bytes = bytes
    }
}

extension TokenStore {
    /// The store's DPoP key material, or nil when no DPoP sign-in made one yet.
    /// - Throws: `integrityCheckFailed` (a row that does not open, an unknown residence), storage errors.
    package func dpopKeyMaterial() throws -> DPoPKeyMaterial? {
        try connection.read { db, envelope in
            guard let found = try DPoPStateRecord.find(db, .key, envelope: envelope) else { return nil }
            guard let tag = found.residence, let residence = DPoPKeyResidence(rawValue: tag) else {
                throw TokenStoreError(.integrityCheckFailed, "The store's DPoP key names no place it lives.")
            }
            return DPoPKeyMaterial(residence: residence, bytes: found.secret)
        }
    }

    /// Keeps `material` as the store's DPoP key unless the store has one already (one key per
    /// store: of two processes making one at once, the first to commit wins). Returns the key
    /// the store keeps, `material` or the one found.
    package func storeDPoPKeyMaterial(_ material: DPoPKeyMaterial) throws -> DPoPKeyMaterial {
        try connection.write { db, envelope in
            if let found = try DPoPStateRecord.find(db, .key, envelope: envelope) {
                guard let tag = found.residence, let residence = DPoPKeyResidence(rawValue: tag) else {
                    throw TokenStoreError(.integrityCheckFailed, "The store's DPoP key names no place it lives.")
                }
                return DPoPKeyMaterial(residence: residence, bytes: found.secret)
            }
            try DPoPStateRecord.upsert(db, .key, secret: material.bytes, residence: material.residence.rawValue, envelope: envelope)
            return material
        }
    }

    /// The latest `DPoP-Nonce` the server at `origin` (`scheme://host[:port]`) gave any process
    /// of this store, or nil.
    package func dpopNonce(origin: String) throws -> String? {
        try connection.read { db, envelope in
            try DPoPStateRecord.find(db, .nonce(origin: origin), envelope: envelope)?.secret.stringValue()
        }
    }

    /// Keeps `nonce` as the latest of `origin` (last writer wins).
    package func recordDPoPNonce(_ nonce: String, origin: String) throws {
        guard !nonce.isEmpty, nonce.utf8.count <= 4096, !origin.isEmpty, origin.utf8.count <= 1024 else {
            throw TokenStoreError(.invalidInput, "A DPoP nonce or origin is empty or too long.")
        }
        try connection.write { db, envelope in
            try DPoPStateRecord.upsert(db, .nonce(origin: origin), secret: SecretBytes(utf8: nonce), envelope: envelope)
        }
    }

    /// The thumbprint `account`'s refresh token is bound to, or nil (a Bearer session, or none).
    package func dpopBinding(account: AccountID) throws -> String? {
        try Self.validate(account)
        return try connection.read { db, envelope in
            try DPoPStateRecord.find(db, .binding(account), envelope: envelope)?.secret.stringValue()
        }
    }

    /// The TCTI of the TPM that seals this store's data key (the `hardware` or `softwareTPM` tier), where its
    /// DPoP key is made and signs too; nil for every other key provider.
    package var hardwareKeyTCTI: String? { keyProvider.tpmTCTI }
}
