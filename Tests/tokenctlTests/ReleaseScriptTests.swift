import Foundation
import TestSupport
import TestTraits
import Testing

/// Releases are git tags made by scripts/release, and the C ABI's bookkeeping (the library's file
/// version, the symbols the library must export) is derived by scripts/abi from
/// include/tokenstore.h and VERSION. Each test works on a copy of the files those scripts read,
/// in a fresh git repository of its own: the repository itself is never tagged.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ReleaseScriptTests {
    /// The files scripts/release and scripts/abi read, copied from this tree.
    static let files = [
        "VERSION", "CHANGELOG.md", "debian/changelog", "debian/libtokenstore1.symbols",
        "include/tokenstore.h", "include/tokenstore.map", "scripts/release", "scripts/abi",
        "api/accepted-breaks.txt", "api/0.3.0/TokenStore.json.gz", "api/0.3.0/AuthSession.json.gz",
    ]

    /// A git repository holding a copy of `files`, committed.
    struct Copy {
        let folder: TemporaryDirectory
        var root: String { folder.path }

        init() throws {
            folder = try TemporaryDirectory(prefix: "tokenstore-release")
            for file in ReleaseScriptTests.files {
                let target = folder.appending(file)
                try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent(file), to: target)
            }
            try git("init", "--quiet")
            try commit("the files")
        }

        @discardableResult func git(_ arguments: String...) throws -> ChildProcess.Result {
            let result = try ChildProcess.run(
                "/usr/bin/git", ["-C", root, "-c", "user.name=Test", "-c", "user.email=test@example.org"] + arguments)
            try #require(result.termination.shellStatus == 0, "git \(arguments): \(result)")
            return result
        }

        func commit(_ message: String) throws { try git("add", "-A"); try git("commit", "--quiet", "-m", message) }

        /// Runs scripts/NAME of the copy (a tag needs a tagger: the test's own identity).
        func run(_ script: String, _ arguments: [String] = []) throws -> ChildProcess.Result {
            let identity = ["GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.org",
                            "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.org"]
            return try ChildProcess.run(
                "\(root)/scripts/\(script)", arguments,
                environment: ProcessInfo.processInfo.environment.merging(identity) { _, given in given })
        }

        func read(_ file: String) throws -> String { try String(contentsOfFile: "\(root)/\(file)", encoding: .utf8) }

        func write(_ file: String, _ text: String) throws {
            try text.write(toFile: "\(root)/\(file)", atomically: true, encoding: .utf8)
        }

        var version: String { get throws { try read("VERSION").trimmingCharacters(in: .whitespacesAndNewlines) } }

        /// The release commit's edits: CHANGELOG's "Unreleased" named, debian/changelog released,
        /// the release's Swift API kept under api/VERSION (`scripts/api-check --dump` needs a build:
        /// the copy stands for its files here) and the accepted breaks emptied.
        func prepareRelease(date: String = "2026-12-03") throws {
            let version = try version
            for module in ["TokenStore", "AuthSession"] {
                let target = folder.appending("api/\(version)/\(module).json.gz")
                try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: folder.appending("api/0.3.0/\(module).json.gz"), to: target)
            }
            try write("api/accepted-breaks.txt", "# Breaks since the newest release under api/.\n")
            try write("CHANGELOG.md", try read("CHANGELOG.md").replacingOccurrences(
                of: "## Unreleased", with: "## \(version) — \(date)"))
            var debian = try read("debian/changelog")
            if let firstLine = debian.range(of: "\n") {
                debian.replaceSubrange(debian.startIndex..<firstLine.lowerBound,
                                       with: "tokenstore (\(version)) unstable; urgency=medium")
            }
            try write("debian/changelog", debian)
            try commit("Release \(version)")
        }

        var tags: [String] { get throws { try git("tag", "--list").standardOutputText.split(separator: "\n").map(String.init) } }
    }

    /// The tree as it is between releases: VERSION names the release being prepared, which the
    /// header's list and the symbols file may name; scripts/abi derives the ABI version from them.
    @Test func abiBookkeepingIsDerivedAndAgrees() throws {
        let copy = try Copy()
        let check = try copy.run("abi", ["check"])
        #expect(check.termination.shellStatus == 0, "\(check)")
        let version = try copy.run("abi", ["version"]).standardOutputText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.wholeMatch(of: /1\.[0-9]+\.0/) != nil, "\(version)")
        let functions = try copy.run("abi", ["functions"]).standardOutputText.split(separator: "\n")
        #expect(functions.contains("ts_store_open") && functions.contains("ts_session_dpop_proof"))
        #expect(functions.allSatisfy { $0.hasPrefix("ts_") } && functions.count == Set(functions).count)

        // A VERSION older than what the header says was added (the state the trial found: 0.3.0
        // with symbols at 0.4.0) fails the check and so the release.
        try copy.write("VERSION", "0.3.0\n")
        let stale = try copy.run("abi", ["check"])
        #expect(stale.termination.shellStatus == 1)
        #expect(stale.standardErrorText.contains("newer than VERSION 0.3.0"), "\(stale)")
        // A function added to the header without its symbols-file line fails it too.
        try copy.write("VERSION", "0.4.0\n")
        try copy.write("include/tokenstore.h", try copy.read("include/tokenstore.h").replacingOccurrences(
            of: "void ts_string_free(char *string);", with: "void ts_string_free(char *string);\nint ts_new_call(void);"))
        let unlisted = try copy.run("abi", ["check"])
        #expect(unlisted.termination.shellStatus == 1)
        #expect(unlisted.standardErrorText.contains("ts_new_call"), "\(unlisted)")
    }

    /// Between releases the script refuses, naming each thing to do, and makes no tag.
    @Test func releaseRefusesAnUnreleasedTree() throws {
        let copy = try Copy()
        let result = try copy.run("release")
        #expect(result.termination.shellStatus == 1)
        #expect(result.standardErrorText.contains("rename '## Unreleased'"), "\(result)")
        #expect(result.standardErrorText.contains("UNRELEASED"), "\(result)")
        #expect(result.standardErrorText.contains("api/\(try copy.version)/TokenStore.json.gz is missing"), "\(result)")
        #expect(try copy.tags.isEmpty)
    }

    /// After the release commit: an annotated tag named after VERSION on HEAD, nothing pushed;
    /// a second run refuses (the tag exists), and so does a dirty tree.
    @Test func releaseTagsTheReleaseCommit() throws {
        let copy = try Copy()
        try copy.prepareRelease()
        let version = try copy.version
        let checkOnly = try copy.run("release", ["--check"])
        #expect(checkOnly.termination.shellStatus == 0, "\(checkOnly)")
        #expect(try copy.tags.isEmpty, "--check made a tag")
        let result = try copy.run("release")
        #expect(result.termination.shellStatus == 0, "\(result)")
        #expect(try copy.tags == [version])
        #expect(try copy.git("cat-file", "-t", version).standardOutputText == "tag\n", "not an annotated tag")
        #expect(try copy.git("rev-parse", "\(version)^{commit}").standardOutputText
                    == copy.git("rev-parse", "HEAD").standardOutputText)
        #expect(result.standardOutputText.contains("git push origin \(version)"))
        let again = try copy.run("release")
        #expect(again.termination.shellStatus == 1)
        #expect(again.standardErrorText.contains("exists already"), "\(again)")

        let dirty = try Copy()
        try dirty.prepareRelease()
        try dirty.write("VERSION", "\(try dirty.version)\n\n")
        let refused = try dirty.run("release")
        #expect(refused.termination.shellStatus == 1)
        #expect(refused.standardErrorText.contains("uncommitted"), "\(refused)")
        #expect(try dirty.tags.isEmpty)
    }
}
