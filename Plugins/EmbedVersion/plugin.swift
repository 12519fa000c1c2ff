import Foundation
import PackagePlugin

/// Compiles the top-level `VERSION` file, the one source of the release number, into the
/// target as `TokenStoreVersion.string` (shown by `tokenctl --version` and `ts_version()`;
/// the Makefile writes it into `tokenstore.pc` and the Python package).
@main
struct EmbedVersion: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let version = context.package.directoryURL.appending(path: "VERSION").resolvingSymlinksInPath()
        let output = context.pluginWorkDirectoryURL.appending(path: "TokenStoreVersion.swift")
        // A plain shell step: the file holds one line, MAJOR.MINOR.PATCH, checked here.
        let script = """
            set -eu
            v=$(tr -d '[:space:]' < "$1")
            case "$v" in *[!0-9.]*|'') echo "VERSION: not MAJOR.MINOR.PATCH: $v" >&2; exit 1;; esac
            printf '%s\\n' \
              '/// The library version (semantic versioning), generated from the top-level VERSION file.' \
              'public enum TokenStoreVersion {' \
              '    /// `MAJOR.MINOR.PATCH`.' \
              "    public static let string = \\"$v\\"" \
              '}' > "$2.tmp"
            mv "$2.tmp" "$2"
            """
        return [
            .buildCommand(
                displayName: "Embedding VERSION",
                executable: URL(filePath: "/bin/sh"),
                arguments: ["-c", script, "sh", version.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: [version],
                outputFiles: [output])
        ]
    }
}
