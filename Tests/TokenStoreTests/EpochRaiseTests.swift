import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Issue 24 item 3 (review N4): the epoch was raised at chosen call sites (logout, rotation,
/// `recordCredentialState`), so a sign-in that replaced a session, a refresh the server
/// rejected, a superseded token and a discard left it where it was: an older copy put back
/// brought back the replaced session, dropped the outbox entry and un-revoked the user,
/// undetected. The record layer now makes every transaction that queues an outbox entry or
/// records a user `revoked` raise it. Each change below: copy the files, make the change,
/// put the copy back, open → `storeRolledBack`.
@Suite("Epoch raised by the record layer", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct EpochRaiseTests {
    let alice: AccountID = "alice"
    let userA = "000101.a.apple"
    let userB = "000202.b.apple"

    /// The session changes a rollback must not undo.
    enum Change: String, CaseIterable, CustomTestStringConvertible {
        case signInReplacingSession, refreshRejected, supersededToken, discard, logout, rejectedWithoutUser
        var testDescription: String { rawValue }
    }

    /// What the store holds before the copy is taken.
    private func prepare(_ change: Change, _ ledger: SessionLedger) throws {
        if change == .rejectedWithoutUser { return }
        try ledger.saveSignIn(account: alice, refreshToken: secret("RT-ONE"), appleUserID: userA, accessToken: nil)
        if change == .discard {
            guard case .queued = try ledger.beginLogout(account: alice) else {
                Issue.record("the logout queued nothing")
                return
            }
        }
    }

    /// Makes `change`; returns whether it changed anything a rollback could undo.
    private func make(_ change: Change, _ store: TokenStore) throws -> Bool {
        let ledger = store.ledger
        switch change {
        case .signInReplacingSession:
            return try ledger.saveSignIn(account: alice, refreshToken: secret("RT-TWO"), appleUserID: userB, accessToken: nil)
        case .refreshRejected:
            return try ledger.rejectRefreshToken(account: alice, presented: secret("RT-ONE"))
        case .supersededToken:
            let outcome = try ledger.replaceRefreshToken(
                account: alice, presented: secret("RT-OLDER"), with: secret("RT-FRESH"), accessToken: nil)
            return outcome == .superseded
        case .discard:
            guard let entry = try store.pendingRevocations().first else { return false }
            try ledger.discardPendingRevocation(entry)
            return true
        case .logout:
            if case .queued = try ledger.beginLogout(account: alice) { return true }
            return false
        case .rejectedWithoutUser:
            // Nothing to reject: nothing changes, and the epoch must stay (control case).
            return try ledger.rejectRefreshToken(account: alice, presented: secret("RT-NONE"))
        }
    }

    @Test("each change queues or revokes, raises the epoch once, and an older copy put back is storeRolledBack", arguments: Change.allCases)
    func olderCopyIsRefused(_ change: Change) throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try prepare(change, t.store.ledger)
        let before = try t.store.epochStatus()
        #expect(!before.isRolledBack)
        t.store.close()
        let copy = t.fileBytes()

        let store = try t.reopen()
        let changed = try make(change, store)
        let after = try store.epochStatus()
        store.close()
        if change == .rejectedWithoutUser {
            #expect(!changed)
            #expect(after == before, "a transaction that changed nothing raised the epoch")
            return
        }
        #expect(changed, "the change did not happen")
        #expect(after == StoreEpochStatus(file: before.file + 1, keyProvider: before.file + 1))

        for suffix in ["", "-wal", "-shm"] { unlink(t.path + suffix) }
        for (file, data) in copy {
            #expect(FileManager.default.createFile(atPath: file, contents: data, attributes: [.posixPermissions: 0o600]))
        }
        do {
            _ = try t.reopen()
            Issue.record("\(change): the older copy opened")
        } catch let error as TokenStoreError {
            #expect(error.code == .storeRolledBack, "\(error)")
            #expect(error.message.contains("file \(before.file), key provider \(before.file + 1)"), "\(error.message)")
            #expect(!error.description.contains("RT-") && !error.description.contains("alice"))
        }
    }

    @Test("a record change that raises the epoch is refused in a transaction that cannot raise it; nothing is written")
    func raiseOutsideStoreTransactionIsRefused() throws {
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let envelope = t.store.connection.envelope
        t.store.close()
        let db = try t.rawDatabase()
        #expect(throws: TokenStoreError.ioError) {
            try db.writeTransaction {
                try CredentialRecord.record(db, userID: userA, to: .revoked, reason: .appleRevoked, detail: nil, envelope: envelope)
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM credential_history") == 0)
        // An authorized state needs no raise and commits.
        try db.writeTransaction {
            try CredentialRecord.record(db, userID: userA, to: .authorized, reason: .signIn, detail: nil, envelope: envelope)
        }
        #expect(try db.scalarInt("SELECT count(*) FROM credential_history") == 1)
    }
}
