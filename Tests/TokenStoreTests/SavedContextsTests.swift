import TestSupport
import TestTraits
import Testing
@testable import TokenStore

@Suite("Saved TPM key contexts", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SavedContextsTests {
    @Test("past the limit, the key unused the longest is forgotten, not the one in use")
    func theLeastRecentlyUsedGoes() {
        // Found in CI: the suite's parallel TPM tests sign with more keys than the limit, and a
        // proof then lost its own key's context between two proofs (a full load: 7 commands, not 2).
        let contexts = SavedContexts()
        let slots = (0...SavedContexts.limit).map { SavedContexts.Slot(tcti: "swtpm:port=\($0)", blob: [UInt8($0)]) }
        for slot in slots.dropLast() { contexts.keep([UInt8(slot.blob[0]), 0xC0], for: slot) }
        #expect(contexts.context(for: slots[0]) == [0, 0xC0], "the first key, used again: now the most recent")
        contexts.keep([UInt8(SavedContexts.limit), 0xC0], for: slots[SavedContexts.limit])
        #expect(contexts.context(for: slots[0]) == [0, 0xC0], "the key in use stays")
        #expect(contexts.context(for: slots[1]) == nil, "the one unused the longest went")
        let kept = slots.filter { contexts.context(for: $0) != nil }.count
        #expect(kept == SavedContexts.limit)
        contexts.forget(slots[0])
        #expect(contexts.context(for: slots[0]) == nil)
    }
}
