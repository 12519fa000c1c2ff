import Foundation
import TestSupport
import TestTraits
import Testing

/// The release link's machine-dependent part lives in scripts (issue 25 item 6): Package.swift
/// probes nothing, scripts/release-link prints the flags for this machine, and
/// scripts/check-symbol-order (run by `make release`, so by CI) fails on a stale order file.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ReleaseLinkTests {
    private func script(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> ChildProcess.Result
    {
        var base = ProcessInfo.processInfo.environment
        base.removeValue(forKey: "TOKENSTORE_SYMBOL_ORDER")
        base.removeValue(forKey: "TOKENSTORE_SYMBOL_ORDER_MIN")
        return try ChildProcess.run(
            repositoryRoot.appendingPathComponent("scripts/\(name)").path, arguments,
            environment: base.merging(environment) { _, given in given })
    }

    /// No glibc probe, no linker choice, no order file in the manifest: a plain `swift build`
    /// links with the toolchain's defaults whatever the build machine.
    @Test func manifestIsDeclarative() throws {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        for probe in ["import Glibc", "confstr", "-use-ld", "pack-relative-relocs", "symbol-order", "--no-export-dynamic"] {
            #expect(!manifest.contains(probe), "Package.swift still has \(probe)")
        }
    }

    /// With glibc ≥ 2.36 and lld (this machine: Debian 12, the Swift toolchain's ld.lld) the
    /// library and tokenctl get lld, DT_RELR and the ordering; tokenctl alone the static libstdc++.
    @Test func releaseLinkFlagsPerProduct() throws {
        let glibc = try ChildProcess.run("getconf", ["GNU_LIBC_VERSION"]).standardOutputText
        let version = glibc.split(separator: " ").last.map { $0.split(separator: ".").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } } ?? []
        try #require(version.count >= 2 && (version[0], version[1]) >= (2, 36), "glibc older than 2.36: \(glibc)")
        let library = try script("release-link", ["tokenstore"])
        let tokenctl = try script("release-link", ["tokenctl"])
        let unordered = try script("release-link", ["tokenctl"], environment: ["TOKENSTORE_SYMBOL_ORDER": "0"])
        #expect(library.termination.shellStatus == 0 && tokenctl.termination.shellStatus == 0)
        for flags in [library.standardOutputText, tokenctl.standardOutputText] {
            #expect(flags.contains("-Xswiftc -use-ld=lld"), "\(flags)")
            #expect(flags.contains("-Xlinker -z -Xlinker pack-relative-relocs"), "\(flags)")
            #expect(flags.contains("--symbol-ordering-file=\(repositoryRoot.path)/scripts/linker/symbol-order.txt"), "\(flags)")
        }
        #expect(!library.standardOutputText.contains("--no-export-dynamic"))
        #expect(tokenctl.standardOutputText.contains("-Xlinker --no-export-dynamic"))
        #expect(!unordered.standardOutputText.contains("symbol-ordering-file"))
        #expect(unordered.standardOutputText.contains("pack-relative-relocs"))
        // The swiftc part is the same for both products, so building one after the other recompiles nothing.
        let swiftc = { (flags: String) in flags.split(separator: " ").filter { $0.hasPrefix("-use-ld") } }
        #expect(swiftc(library.standardOutputText) == swiftc(tokenctl.standardOutputText))
        let bad = try script("release-link", ["tokenctl.so"])
        #expect(bad.termination.shellStatus == 64)
    }

    /// A fresh order file passes; one whose names a change has mostly replaced fails, naming the
    /// fix. (The debug tokenctl stands in for the release build: the check only reads symbols.)
    @Test func staleOrderFileFailsTheCheck() throws {
        let folder = try TemporaryDirectory(prefix: "tokenstore-order")
        let bin = folder.appending("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let built = TokenctlBinary.url.resolvingSymlinksInPath()
        let library = built.deletingLastPathComponent().appendingPathComponent("libtokenstore.so")
        try FileManager.default.createSymbolicLink(at: bin.appendingPathComponent("tokenctl"), withDestinationURL: built)
        try FileManager.default.createSymbolicLink(
            at: bin.appendingPathComponent("libtokenstore.so"),
            withDestinationURL: FileManager.default.fileExists(atPath: library.path) ? library : built)
        let symbols = try ChildProcess.run("nm", ["--defined-only", built.path]).standardOutputText
            .split(separator: "\n").compactMap { line -> String? in
                let fields = line.split(separator: " ")
                return fields.count >= 3 && fields[2].hasPrefix("$s") ? String(fields[2]) : nil
            }
        try #require(symbols.count >= 100)
        let names = Array(symbols.prefix(100))
        let fresh = folder.appending("fresh.txt"), stale = folder.appending("stale.txt")
        try Data((names.joined(separator: "\n") + "\n").utf8).write(to: fresh)
        let renamed = names.enumerated().map { $0.offset < 20 ? $0.element : $0.element + "_renamed" }
        try Data((renamed.joined(separator: "\n") + "\n").utf8).write(to: stale)

        let passing = try script("check-symbol-order", [bin.path, fresh.path])
        #expect(passing.termination.shellStatus == 0, "\(passing.standardErrorText)")
        #expect(passing.standardOutputText.contains("METRIC symbol_order_found_percent=100 found=100 listed=100"))
        let failing = try script("check-symbol-order", [bin.path, stale.path])
        #expect(failing.termination.shellStatus == 1)
        #expect(failing.standardOutputText.contains("METRIC symbol_order_found_percent=20 "))
        #expect(failing.standardErrorText.contains("stale; regenerate it with 'make symbol-order'"))
        let missing = try script("check-symbol-order", [folder.appending("nothing").path, fresh.path])
        #expect(missing.termination.shellStatus == 1)
    }
}
