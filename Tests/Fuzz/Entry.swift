// tokenstore-fuzz: the `fuzz_decoders` targets.
//
// Built with `-DFUZZING -sanitize=fuzzer,address` (see scripts/fuzz) this is a libFuzzer binary:
// `main` runs libFuzzer's driver, which hands each input to the target named by the environment
// variable FUZZ_TARGET (one of `FuzzTarget.allCases`); libFuzzer's usual flags follow on argv.
//
// Built normally (plain `swift build`) it is a replay tool:
//
//   tokenstore-fuzz                       replay every file of Tests/Fuzz/Corpus/<target>/
//   tokenstore-fuzz TARGET FILE|DIR ...   replay the given files (e.g. a crash-… artifact)
//
// It prints `fuzz-replay target=<t> files=<n>` per target and exits non-zero on a violation.
import Foundation

#if FUZZING
    // libFuzzer's own `main` cannot be used: SwiftPM links every executable of the build (also the
    // MigrationEmbedder plugin tool) with the same flags, and renames Swift entry points on Linux.
    // So the fuzz build compiles with `-sanitize=fuzzer` at the frontend only (coverage, no
    // runtime) and links `libclang_rt.fuzzer_no_main`; this `main` hands over to its driver.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @main
    enum FuzzMain {
        static func main() {
            _ = FuzzTarget.selected  // fail fast on a wrong FUZZ_TARGET
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
                let bytes = UnsafeRawBufferPointer(start: data.map(UnsafeRawPointer.init), count: data == nil ? 0 : size)
                FuzzTarget.selected.run(bytes)
                return 0
            }
            exit(status)
        }
    }
#else
    @main
    enum Replay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            var plan: [(FuzzTarget, [URL])] = []
            if arguments.isEmpty {
                let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus")
                for target in FuzzTarget.allCases {
                    plan.append((target, files(in: corpus.appendingPathComponent(target.rawValue))))
                }
            } else {
                guard let target = FuzzTarget(rawValue: arguments[0]) else {
                    fail("unknown target \(arguments[0]); one of \(FuzzTarget.allCases.map(\.rawValue))")
                }
                plan.append((target, arguments.dropFirst().flatMap { files(in: URL(fileURLWithPath: $0)) }))
            }
            for (target, urls) in plan {
                guard !urls.isEmpty else { fail("no corpus files for \(target.rawValue)") }
                for url in urls {
                    guard let data = FileManager.default.contents(atPath: url.path) else { fail("cannot read \(url.path)") }
                    FuzzCheck.currentInput = url.lastPathComponent
                    data.withUnsafeBytes { target.run($0) }
                }
                print("fuzz-replay target=\(target.rawValue) files=\(urls.count)")
            }
        }

        /// The regular files under `url` (or `url` itself), sorted.
        static func files(in url: URL) -> [URL] {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return [] }
            guard isDirectory.boolValue else { return [url] }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { url.appendingPathComponent($0) }
        }

        static func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("tokenstore-fuzz: \(message)\n".utf8))
            exit(2)
        }
    }
#endif
