import TestSupport
import TestTraits
import Testing
@testable import TokenStore

@Test(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) func patternMatchingByCode() {
    func classify(_ error: any Error) -> String {
        do { throw error }
        catch TokenStoreError.keyringLocked { return "locked" }
        catch { return "other" }
    }
    #expect(classify(TokenStoreError(.keyringLocked, "x")) == "locked")
    #expect(classify(TokenStoreError(.ioError, "x")) == "other")
}

/// Every code, with its pattern: the raw values are stable API (`tokenctl --json` prints them).
private let everyPattern: [(TokenStoreError, String)] = [
    (.secretServiceUnavailable, "secretServiceUnavailable"), (.keyringLocked, "keyringLocked"),
    (.dataKeyMissing, "dataKeyMissing"), (.dataKeyCorrupt, "dataKeyCorrupt"),
    (.integrityCheckFailed, "integrityCheckFailed"), (.databaseCorrupt, "databaseCorrupt"),
    (.databaseBusy, "databaseBusy"), (.schemaTooNew, "schemaTooNew"), (.migrationFailed, "migrationFailed"),
    (.unsafeFileLayout, "unsafeFileLayout"), (.invalidInput, "invalidInput"), (.ioError, "ioError"),
    (.storeClosed, "storeClosed"), (.timedOut, "timedOut"), (.cancelled, "cancelled"),
    (.wrongPassphrase, "wrongPassphrase"), (.schemaTampered, "schemaTampered"), (.diskFull, "diskFull"),
    (.storeRolledBack, "storeRolledBack"), (.notAStore, "notAStore"), (.migrationRequired, "migrationRequired"),
    (.wrongKeyProvider, "wrongKeyProvider"), (.tpmUnavailable, "tpmUnavailable"), (.tpmMismatch, "tpmMismatch"),
    (.storeLocked, "storeLocked"), (.userPresenceDenied, "userPresenceDenied"), (.lockSourceUnavailable, "lockSourceUnavailable"),
    (.wrongPIN, "wrongPIN"), (.tpmLockedOut, "tpmLockedOut"),
]

@Test(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) func everyCodeHasAPatternThatMatchesOnlyItsCode() {
    #expect(TokenStoreError.Code.allCases.map(\.rawValue) == everyPattern.map(\.1))
    for (pattern, rawValue) in everyPattern {
        #expect(pattern.code.rawValue == rawValue)
        #expect("\(pattern.code)" == rawValue)
        #expect(TokenStoreError.Code(known: rawValue) == pattern.code)
        #expect(!pattern.description.isEmpty && pattern.description.hasPrefix("TokenStoreError.\(rawValue): "))
        for (other, otherRawValue) in everyPattern {
            let thrown: any Error = TokenStoreError(other.code, "some message", hint: "a hint", cause: .other("a cause"))
            #expect((pattern ~= thrown) == (rawValue == otherRawValue), "\(rawValue) vs \(otherRawValue)")
        }
    }
    #expect(TokenStoreError.Code(known: "noSuchCode") == nil)
    #expect(TokenStoreError.Code(rawValue: "noSuchCode").rawValue == "noSuchCode")
}

@Test(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) func errorsAreEqualByCodeOnly() {
    let detailed = TokenStoreError(.databaseBusy, "The database stayed locked.", hint: "wait", cause: .sqlite(extendedCode: 5, message: "busy"))
    #expect(detailed == TokenStoreError.databaseBusy)
    #expect(detailed != TokenStoreError.ioError)
    #expect(throws: TokenStoreError.databaseBusy) { throw detailed }
    // A switch over codes needs a `default:` (codes are a struct); the patterns work in a switch over errors.
    switch detailed.code {
    case .keyringLocked: Issue.record("wrong code matched")
    case .databaseBusy: break
    default: Issue.record("code did not match")
    }
    switch detailed as any Error {
    case TokenStoreError.storeClosed, TokenStoreError.timedOut, TokenStoreError.cancelled, TokenStoreError.wrongPassphrase:
        Issue.record("wrong code matched")
    case TokenStoreError.databaseBusy: break
    default: Issue.record("code did not match")
    }
}
