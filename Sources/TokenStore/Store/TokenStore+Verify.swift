import Foundation

/// What ``TokenStore/verify()`` found.
public struct VerificationReport: Sendable {
    /// One row that did not open, named by table and a short row id (a hash prefix, never an identifier).
    public struct BadRow: Sendable, Equatable {
        public let table: String
        public let rowID: String
        public let reason: String
    }
    /// `PRAGMA integrity_check` lines; `["ok"]` when the file is sound.
    public let integrityCheck: [String]
    public let rowsChecked: Int
    public let badRows: [BadRow]
    public var isHealthy: Bool { integrityCheck == ["ok"] && badRows.isEmpty }
}

extension TokenStore {
    /// Runs `PRAGMA integrity_check` and opens every sealed row, reporting each bad one.
    /// - Parameter progress: called with (done, total) as rows are checked.
    public func verify(progress: ((Int, Int) -> Void)? = nil) throws -> VerificationReport {
        try read { db in
            var integrity: [String] = []
            try db.forEachRow("PRAGMA integrity_check") { integrity.append($0.text(0)) }
            let total = Int(try db.scalarInt(
                "SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending_revocations) + (SELECT count(*) FROM credential_states)") ?? 0)
            var done = 0
            var bad: [VerificationReport.BadRow] = []
            func check(_ table: String, _ rowKey: [UInt8], _ body: () throws -> Void) {
                do { try body() } catch let error as TokenStoreError {
                    bad.append(.init(table: table, rowID: Hex.encode(Array(rowKey.prefix(6))), reason: "\(error.code.rawValue): \(error.message)"))
                } catch {
                    bad.append(.init(table: table, rowID: Hex.encode(Array(rowKey.prefix(6))), reason: "unexpected error"))
                }
                done += 1
                progress?(done, total)
            }
            try db.forEachRow("SELECT lookup, kind, key_id, sealed, created_at, updated_at, account_ref FROM items") { row in
                check("items", row.blob(0)) {
                    let item = try decodeItem(row)
                    // account_ref is outside the seal; a changed one would steer account-wide queries.
                    guard accountRef(service: item.key.service, account: item.key.account) == row.blob(6) else {
                        throw TokenStoreError(.integrityCheckFailed, "An item's account reference does not match its sealed names.")
                    }
                }
            }
            try db.forEachRow("SELECT entry_id, key_id, sealed, account_ref FROM pending_revocations") { row in
                check("pending_revocations", row.blob(0)) {
                    let fields = try open(row.blob(2), keyID: row.blob(1), kind: .pendingRevocation, rowKey: row.blob(0))
                    guard let service = fields.string(.service), let account = fields.string(.account), fields.secret != nil,
                          accountRef(service: service, account: account) == row.blob(3)
                    else { throw TokenStoreError(.integrityCheckFailed, "A pending revocation is missing fields or misplaced.") }
                }
            }
            try db.forEachRow("SELECT user_ref, key_id, sealed_user, state FROM credential_states") { row in
                check("credential_states", row.blob(0)) {
                    _ = try authenticatedState(column: row.text(3), keyID: row.blob(1), sealed: row.blob(2), userRef: row.blob(0))
                }
            }
            return VerificationReport(integrityCheck: integrity, rowsChecked: done, badRows: bad)
        }
    }

    /// The schema version of the open store.
    public func schemaVersion() throws -> Int {
        try withDatabase { db in try Migrator().currentVersion(in: db) }
    }

    /// The newest schema version this library knows.
    public static var supportedSchemaVersion: Int { Migrator().latestVersion }
}
