import Foundation
import TestSupport
import TestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Sources/CTSS2 declares the tpm2-tss types, constants and function types it uses itself, so
/// that a build (TokenStore's, an app's) needs no tpm2-tss headers (libtss2-dev): tpm2-tss is
/// dlopen'ed. scripts/check-tss2-shim compares those declarations with the installed headers and
/// builds shim.h with /usr/include/tss2 hidden; the TPM suites show the library works with them.
@Suite("CTSS2 needs no tpm2-tss headers", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TSS2ShimTests {
    @Test("no tpm2-tss header is included by the module")
    func noTSS2Include() throws {
        let folder = repositoryRoot.appendingPathComponent("Sources/CTSS2")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".h") || $0.hasSuffix(".modulemap") }
        #expect(files.contains("shim.h") && files.contains("tss2_declarations.h"), "\(files)")
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            let includes = text.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("#include") }
            #expect(!includes.contains { $0.contains("tss2/") }, "\(file) includes a tpm2-tss header: \(includes)")
        }
    }

    @Test("the declarations equal tpm2-tss's (sizes, offsets, constants, function types), and shim.h builds with /usr/include/tss2 hidden",
          .enabled(if: access("/usr/include/tss2/tss2_esys.h", R_OK) == 0, "needs libtss2-dev (scripts/install-deps) to compare with"))
    func declarationsMatchTheHeaders() throws {
        let script = repositoryRoot.appendingPathComponent("scripts/check-tss2-shim").path
        let result = try ChildProcess.run("/bin/bash", [script], timeout: .seconds(300))
        print(result.standardOutputText.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(result.termination.code == 0, "\(result.standardOutputText)\(result.standardErrorText)")
        // Every function of shim.h's table, and no fewer, compared with tpm2-tss's prototype.
        let shim = try String(contentsOf: repositoryRoot.appendingPathComponent("Sources/CTSS2/shim.h"), encoding: .utf8)
        let functions = shim.split(separator: "\n").filter {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix("TOKENSTORE_TSS2_SYMBOL(")
        }.count
        #expect(functions >= 24, "\(functions) functions in shim.h's table")
        #expect(result.standardOutputText.contains("layout values equal") && result.standardOutputText.contains("\(functions) function types equal"),
                "\(result.standardOutputText)")
        if getuid() == 0 {
            #expect(result.standardOutputText.contains("shim.h builds without /usr/include/tss2"), "\(result.standardOutputText)")
        }
    }
}
