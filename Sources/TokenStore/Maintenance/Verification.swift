import FoundationEssentials

/// What ``TokenStore/verify(progress:)`` found.
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
    /// How the schema differs from the one the migrations make (a planted trigger, view,
    /// table or index), one line each; empty when it matches.
    public let schemaDifferences: [String]
    public var isHealthy: Bool { integrityCheck == ["ok"] && badRows.isEmpty && schemaDifferences.isEmpty }
}

extension TokenStore {
    /// Runs `PRAGMA integrity_check`, compares the schema with the one the migrations make,
    /// opens every sealed row and checks the MACs of the logout marks and the credential
    /// history (each chain, and its last entry against the head sealed in the user's state),
    /// reporting each bad row.
    /// - Parameter progress: called with (done, total) as rows are checked.
    public func verify(progress: ((Int, Int) -> Void)? = nil) throws -> VerificationReport {
        try connection.read { db, envelope in
            var integrity: [String] = []
            try db.forEachRow("PRAGMA integrity_check") { integrity.append($0.text(0)) }
            let schemaDifferences = try SchemaCheck.differences(in: db)
            let total = try SealedTables.rowCount(db)
            var done = 0
            var bad: [VerificationReport.BadRow] = []
            for table in SealedTables.all {
                try table.verifyRows(db, envelope: envelope) { rowKey, body in
                    do { try body() } catch let error as TokenStoreError {
                        bad.append(.init(
                            table: table.table, rowID: Hex.encode(Array(rowKey.prefix(6))),
                            reason: "\(error.code.rawValue): \(error.message)"))
                    } catch {
                        bad.append(.init(table: table.table, rowID: Hex.encode(Array(rowKey.prefix(6))), reason: "unexpected error"))
                    }
                    done += 1
                    progress?(done, total)
                }
            }
            // The clear columns that steer logouts and record history, checked against their MACs
            // (their bad rows are reported; `rowsChecked` counts the sealed rows).
            let report = { (table: String, rowID: String, problem: String?) in
                if let problem { bad.append(.init(table: table, rowID: rowID, reason: problem)) }
            }
            try AccountMarks.verifyRows(db, envelope: envelope) { report(AccountMarks.table, $0, $1) }
            try CredentialHistory.verifyRows(db, envelope: envelope, heads: try CredentialRecord.historyHeads(db, envelope: envelope)) {
                report(CredentialHistory.table, $0, $1)
            }
            return VerificationReport(
                integrityCheck: integrity, rowsChecked: done, badRows: bad, schemaDifferences: schemaDifferences)
        }
    }

    /// The schema version of the open store.
    public func schemaVersion() throws -> Int {
        try connection.withDatabase { db in try Migrator().currentVersion(in: db) }
    }

    /// The newest schema version this library knows.
    public static var supportedSchemaVersion: Int { Migrator().latestVersion }
}
