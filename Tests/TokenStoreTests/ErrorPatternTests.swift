import TestSupport
import Testing
@testable import TokenStore

@Test(.timeLimit(.minutes(TestTimeLimit.minutes))) func patternMatchingByCode() {
    func classify(_ error: any Error) -> String {
        do { throw error }
        catch TokenStoreError.keyringLocked { return "locked" }
        catch { return "other" }
    }
    #expect(classify(TokenStoreError(.keyringLocked, "x")) == "locked")
    #expect(classify(TokenStoreError(.ioError, "x")) == "other")
}
