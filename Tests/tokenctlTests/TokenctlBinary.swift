import Foundation
import TestSupport

/// What one run of the tokenctl binary produced.
struct TokenctlResult: Sendable {
    let exitCode: Int32
    let standardOutput: String
    let standardError: String
}

/// The built `tokenctl` executable, run as a user would run it.
///
/// SwiftPM cannot link an executable target into a test on Linux, so the tests run the
/// binary that `swift build`/`swift test` put next to the test bundle. Set `TOKENCTL_BINARY`
/// to test another build.
enum TokenctlBinary {
    /// The executable, found in this order: `$TOKENCTL_BINARY`; next to the test bundle
    /// (`Bundle.main` on Linux, the `.xctest` bundle on macOS); next to the test runner;
    /// `<package>/.build/debug`.
    static let url: URL = {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [URL] = []
        if let override = environment["TOKENCTL_BINARY"], !override.isEmpty {
            candidates.append(URL(fileURLWithPath: override))
        }
        candidates.append(Bundle.main.bundleURL.appendingPathComponent("tokenctl"))
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("tokenctl"))
        }
        if let runner = CommandLine.arguments.first {
            let runnerURL = URL(fileURLWithPath: runner).resolvingSymlinksInPath()
            candidates.append(runnerURL.deletingLastPathComponent().appendingPathComponent("tokenctl"))
        }
        candidates.append(repositoryRoot.appendingPathComponent(".build/debug/tokenctl"))
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            fatalError("tokenctl not built; looked at: \(candidates.map(\.path)). Run 'swift build' first.")
        }
        return found
    }()

    /// Runs tokenctl with `arguments` and waits for it.
    ///
    /// The environment is minimal and predictable: `PATH`, `HOME`, `LANG=C.UTF-8`, then
    /// `environment`; no `TOKENCTL_*` variable leaks in from the shell running the tests.
    /// stdin is `stdin` or empty; stdout and stderr go to files, so a large output cannot
    /// block on a full pipe.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil
    ) throws -> TokenctlResult {
        let directory = try TemporaryDirectory(prefix: "tokenctl-run")
        let inputURL = directory.appending("stdin")
        let outputURL = directory.appending("stdout")
        let errorURL = directory.appending("stderr")
        try Data((stdin ?? "").utf8).write(to: inputURL)
        try Data().write(to: outputURL)
        try Data().write(to: errorURL)
        let input = try FileHandle(forReadingFrom: inputURL)
        let output = try FileHandle(forWritingTo: outputURL)
        let error = try FileHandle(forWritingTo: errorURL)
        defer {
            try? input.close()  // best effort: the files are removed with the directory
            try? output.close()
            try? error.close()
        }

        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        let inherited = ProcessInfo.processInfo.environment
        var base = ["LANG": "C.UTF-8"]
        base["PATH"] = inherited["PATH"]
        base["HOME"] = inherited["HOME"]
        process.environment = base.merging(environment) { _, given in given }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        process.waitUntilExit()

        return TokenctlResult(
            exitCode: process.terminationStatus,
            standardOutput: try String(contentsOf: outputURL, encoding: .utf8),
            standardError: try String(contentsOf: errorURL, encoding: .utf8))
    }
}
