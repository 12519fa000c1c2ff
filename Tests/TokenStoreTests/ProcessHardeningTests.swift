import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// `TokenStore.hardenProcess()` (review N6), in a child process: hardening this test process
/// would leave it non-dumpable and without core files for every later suite.
@Suite("Process hardening", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ProcessHardeningTests {
    @Test("hardenProcess turns core dumps, core files and ptrace attach off")
    func hardenProcess() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        let result = try runChild(child, ["harden", "-"])
        #expect(result.status == 0, "\(result.stderr)")
        // Dumpable (1) before, not (0) after; RLIMIT_CORE soft and hard 0 (/proc/self/limits).
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "HARDEN dumpable=1/0 core=0 0")
    }
}
