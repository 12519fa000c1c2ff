import FoundationEssentials

/// The store's access policy and its lock for every process, recorded in `store_info`
/// (`access_policy`, `locked_everywhere`, schema version 15) under one MAC (`access_mac`, a keyed
/// BLAKE2b under the data key's MAC subkey over the table, the store id, the policy's name and
/// the lock byte).
///
/// Written by the open that applies version 15 (the default policy, unlocked), by a new key
/// (keeping the recorded name, so a reset does not weaken it), by an open that asks for a
/// stronger policy, by ``TokenStore/setAccessPolicy(_:)`` and ``TokenStore/lock(allProcesses:)``;
/// re-MACed by a key switch. From version 15 on a missing, altered or swapped record is
/// `integrityCheckFailed`.
enum AccessPolicyRecord {
    static let table = "store_info"

    struct State: Equatable {
        var policy: AccessPolicy
        var lockedEverywhere: Bool
    }

    static let initial = State(policy: .afterFirstUnlock, lockedEverywhere: false)

    /// Whether the file has the columns (schema version 15 or later).
    static func hasColumns(_ db: Database) throws -> Bool {
        (try db.scalarInt("SELECT count(*) FROM pragma_table_info('store_info') WHERE name = 'access_mac'") ?? 0) > 0
    }

    static func mac(policyName: String, locked: Bool, envelope: Envelope) -> [UInt8] {
        envelope.mac(.accessPolicyMAC, [MACField.name(table), envelope.storeID, Array(policyName.utf8), [locked ? 1 : 0]])
    }

    /// Records `state` with its MAC under `envelope`'s key (inside the caller's transaction);
    /// nothing without the columns.
    static func write(_ db: Database, _ state: State, envelope: Envelope) throws {
        guard try hasColumns(db) else { return }
        let name = state.policy.name
        try db.run(
            "UPDATE store_info SET access_policy = ?, locked_everywhere = ?, access_mac = ? WHERE id = 1",
            [.text(name), .int(state.lockedEverywhere ? 1 : 0), .blob(mac(policyName: name, locked: state.lockedEverywhere, envelope: envelope))])
    }

    /// The lock byte alone, not checked (cheap; read when another connection committed).
    static func lockedUnchecked(_ db: Database) throws -> Bool {
        guard try hasColumns(db) else { return false }
        return (try db.scalarInt("SELECT locked_everywhere FROM store_info WHERE id = 1") ?? 0) != 0
    }

    /// With the store's key: the record, checked against its MAC. `initial` below version 15.
    /// - Throws: `integrityCheckFailed` when the record or its MAC was altered, swapped or removed.
    static func check(_ db: Database, envelope: Envelope) throws -> State {
        guard try hasColumns(db) else { return initial }
        let row = try db.firstRow("SELECT access_policy, locked_everywhere, access_mac FROM store_info WHERE id = 1", []) { row in
            (row.isNull(0) ? nil : row.text(0), row.int(1), row.isNull(2) ? nil : row.blob(2))
        }
        if case let (name?, locked, mac?)? = row, locked == 0 || locked == 1,
            MACField.equal(mac, Self.mac(policyName: name, locked: locked == 1, envelope: envelope)),
            let policy = AccessPolicy(name: name)
        {
            return State(policy: policy, lockedEverywhere: locked == 1)
        }
        throw TokenStoreError(
            .integrityCheckFailed,
            "The store's access-policy record was altered or removed (its MAC does not match): the file was changed outside this library.",
            hint: "Restore the store file from a backup.")
    }

    /// A new key for a store with no sealed row (new or reset): the recorded policy's name kept
    /// when it is one (a reset does not weaken it; the old MAC cannot be checked), unlocked.
    static func writeForNewKey(_ db: Database, envelope: Envelope) throws {
        guard try hasColumns(db) else { return }
        let name = try db.firstRow("SELECT access_policy FROM store_info WHERE id = 1", []) { $0.isNull(0) ? nil : $0.text(0) } ?? nil
        try write(db, State(policy: name.flatMap(AccessPolicy.init(name:)) ?? .afterFirstUnlock, lockedEverywhere: false), envelope: envelope)
    }

    /// In a key switch: the record, checked under `current`, re-MACed under `next`.
    static func rewrite(_ db: Database, from current: Envelope, to next: Envelope) throws {
        guard try hasColumns(db) else { return }
        try write(db, check(db, envelope: current), envelope: next)
    }
}

extension AccessPolicyRecord {
    /// The schema version that brings the record.
    static let version = 15

    /// At open, with the key loaded: the record checked; a `requested` policy stronger than the
    /// recorded one recorded (when the open `writes`) and in force; a weaker one ignored.
    /// - Throws: `integrityCheckFailed`; as a write transaction.
    /// A policy this process cannot enforce is refused (``AccessPolicyGate``) before anything is written.
    static func atOpen(_ db: Database, envelope: Envelope, requested: AccessPolicy?, writes: Bool) throws -> State {
        var state = try check(db, envelope: envelope)
        guard let requested, state.policy.isWeaker(than: requested) else {
            try AccessPolicyGate.check(state.policy)
            return state
        }
        try AccessPolicyGate.check(requested)
        state.policy = requested
        if writes, try hasColumns(db) {
            try db.writeTransaction {
                // Another process may have recorded a stronger one meanwhile: the stronger wins.
                var now = try check(db, envelope: envelope)
                now.policy = AccessPolicy.stronger(now.policy, requested)
                try write(db, now, envelope: envelope)
                state = now
            }
        }
        return state
    }
}
