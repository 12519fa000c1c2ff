import FoundationEssentials

/// A row of `dpop_state`: one DPoP entry (RFC 9449) of the store, sealed with what it names
/// and filed under the keyed hash of that name (`lookup`), so nothing of it is readable in the
/// file: the store's key, a server's latest nonce, or the thumbprint an account is bound to.
enum DPoPStateRecord: LookupSealedTable {
    static let table = "dpop_state"
    static let recordKind = RecordKind.dpop
    /// The key is a secret, but it outlives every session (one key per store): a store whose
    /// last session is gone has nothing left to erase for it.
    static let holdsSecrets = false
    static let rotationTable = "rotation_dpop_state"

    /// What a row names.
    enum Entry: Equatable {
        /// The store's one DPoP key (its material, opaque, with its residence).
        case key
        /// The latest `DPoP-Nonce` of a server origin (`scheme://host[:port]`).
        case nonce(origin: String)
        /// The thumbprint `account`'s refresh token is bound to.
        case binding(AccountID)

        var code: UInt8 {
            switch self {
            case .key: return 1
            case .nonce: return 2
            case .binding: return 3
            }
        }

        var nameParts: [[UInt8]] {
            switch self {
            case .key: return []
            case .nonce(let origin): return [Array(origin.utf8)]
            case .binding(let account): return [Array(account.service.utf8), Array(account.name.utf8)]
            }
        }

        func lookup(_ envelope: Envelope) -> [UInt8] { envelope.lookup(.dpop, [[code]] + nameParts) }

        func fields(secret: SecretBytes, residence: String?) -> RecordFields {
            var fields = RecordFields()
            fields.set(.dpopEntry, [code])
            switch self {
            case .key: break
            case .nonce(let origin): fields.set(.dpopName, origin)
            case .binding(let account):
                fields.set(.service, account.service)
                fields.set(.account, account.name)
            }
            if let residence { fields.set(.dpopResidence, residence) }
            fields.setSecret(secret)
            return fields
        }

        init(_ fields: RecordFields) throws {
            switch fields.bytes(.dpopEntry) {
            case [1]?: self = .key
            case [2]?:
                guard let origin = fields.string(.dpopName) else { throw DPoPStateRecord.malformed() }
                self = .nonce(origin: origin)
            case [3]?:
                guard let service = fields.string(.service), let name = fields.string(.account) else {
                    throw DPoPStateRecord.malformed()
                }
                self = .binding(AccountID(name, service: service))
            default: throw DPoPStateRecord.malformed()
            }
        }
    }

    static func malformed() -> TokenStoreError {
        TokenStoreError(.integrityCheckFailed, "A sealed DPoP entry is missing fields.")
    }

    static func lookup(of entry: Entry, _ envelope: Envelope) -> [UInt8] { entry.lookup(envelope) }

    /// Opens a row (lookup, key_id, sealed) and checks it belongs where it was found.
    static func open(_ row: Row, envelope: Envelope) throws -> (Entry, RecordFields) {
        let lookup = row.blob(0)
        let fields = try envelope.open(row, sealed: 2, keyID: 1, kind: .dpop, rowKey: lookup)
        let entry = try Entry(fields)
        guard fields.secret != nil else { throw malformed() }
        guard entry.lookup(envelope) == lookup else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed DPoP entry does not belong to the row it was found in.")
        }
        return (entry, fields)
    }

    /// The secret and residence tag stored for `entry`, or nil.
    static func find(_ db: Database, _ entry: Entry, envelope: Envelope) throws -> (secret: SecretBytes, residence: String?)? {
        guard let (found, fields) = try row(db, lookup: entry.lookup(envelope), envelope: envelope) else { return nil }
        guard found == entry, let secret = fields.secret else { throw malformed() }
        return (secret, fields.string(.dpopResidence))
    }

    /// Stores `secret` for `entry` (an upsert).
    static func upsert(_ db: Database, _ entry: Entry, secret: SecretBytes, residence: String? = nil, envelope: Envelope) throws {
        try write(db, lookup: entry.lookup(envelope), fields: entry.fields(secret: secret, residence: residence), envelope: envelope)
    }

    /// Deletes `entry`'s row; returns whether there was one.
    @discardableResult
    static func delete(_ db: Database, _ entry: Entry, envelope: Envelope) throws -> Bool {
        try deleteRow(db, lookup: entry.lookup(envelope))
    }
}
