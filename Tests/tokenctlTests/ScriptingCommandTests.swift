import Foundation
import TestTraits
import Testing
import TestSupport

/// What the new-user trial found missing for scripts and support engineers (issue 28): a bare
/// secret on stdout, `--quiet` on `put`, `--verbose` causes, value-aware completions and the
/// man page's ENVIRONMENT, FILES, EXAMPLES and EXIT STATUS. The built binary, the private keyring.
@Suite("tokenctl for scripts and support", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ScriptingCommandTests {
    @Test("get --raw prints the secret's bytes alone (no newline off a terminal); absent items print nothing and exit 1")
    func rawPrintsTheSecretAlone() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary + "\n")  // put strips one trailing newline: the secret ends with one
        let raw = try store.run(["get", "--account", "alice", "--kind", "generic", "--raw"])
        #expect(raw.exitCode == 0, "\(raw.standardError)")
        #expect(raw.standardOutput == canary + "\n", "exactly the secret's bytes: \(raw.standardOutput.debugDescription)")
        #expect(raw.standardError == "")

        let bytes = try store.run(["put", "--account", "bob", "--kind", "generic"], stdin: "p4ss")
        #expect(bytes.exitCode == 0)
        let plain = try store.run(["get", "--account", "bob", "--kind", "generic", "--raw"])
        #expect(plain.standardOutput == "p4ss")

        let absent = try store.run(["get", "--account", "nobody", "--kind", "generic", "--raw"])
        #expect(absent.exitCode == 1)
        #expect(absent.standardOutput == "")

        let withJSON = try store.run(["--json", "get", "--account", "bob", "--kind", "generic", "--raw"])
        #expect(withJSON.exitCode == 64, "\(withJSON.standardError)")
        #expect(withJSON.standardOutput == "")
    }

    @Test("--quiet silences put's confirmation; --json still prints its document")
    func quietPut() throws {
        let store = try TokenctlStore()
        let quiet = try store.run(["--quiet", "put", "--account", "alice", "--kind", "generic"], stdin: "s3cret")
        #expect(quiet.exitCode == 0, "\(quiet.standardError)")
        // Since trial 2 a put that makes the store says so even with --quiet; nothing else is printed.
        #expect(quiet.standardOutput == "", "\(quiet.standardOutput)")
        #expect(quiet.standardError.split(separator: "\n").allSatisfy { $0.hasPrefix("tokenctl: note: ") && $0.contains("new one was made") },
            "\(quiet.standardError)")
        let quietAgain = try store.run(["--quiet", "put", "--account", "alice", "--kind", "generic"], stdin: "s3cret")
        #expect(quietAgain.exitCode == 0 && quietAgain.standardOutput == "" && quietAgain.standardError == "",
            "\(quietAgain.standardOutput)\(quietAgain.standardError)")
        let loud = try store.run(["put", "--account", "alice", "--kind", "generic"], stdin: "s3cret")
        #expect(loud.standardOutput.hasPrefix("Stored generic"))
        let json = try store.json(["--quiet", "put", "--account", "alice", "--kind", "generic"], stdin: "s3cret")
        #expect(json.object["stored"] as? Bool == true)
    }

    @Test("--verbose shows the library's log and the error's cause (errno text), never the account or the secret")
    func verboseShowsCauses() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        let account = "acct-\(makeCanary().prefix(12))"
        let put = try store.run(["--verbose", "put", "--account", account, "--kind", "generic"], stdin: canary)
        #expect(put.exitCode == 0, "\(put.standardError)")
        #expect(put.standardError.contains("store opened"), "the library's debug log: \(put.standardError)")
        let quiet = try store.run(["put", "--account", account, "--kind", "generic"], stdin: canary)
        #expect(!quiet.standardError.contains("store opened"), "no log without --verbose")

        let failing = try store.run(["--verbose", "get", "--account", account, "--kind", "generic", "--reveal"])
        #expect(failing.exitCode == 0)
        #expect(failing.standardOutput.contains(canary), "the secret is printed only on stdout, as asked")
        for output in [put.standardError, put.standardOutput, failing.standardError, quiet.standardError] {
            #expect(!output.contains(canary), "a secret in the verbose output")
            #expect(!output.contains(account), "an account name in the verbose output")
        }
        // An error with an attached cause: a file that is not SQLite (SQLite's own text).
        let notSQLite = store.directory.appending("text/tokens.sqlite").path
        try FileManager.default.createDirectory(atPath: store.directory.appending("text").path, withIntermediateDirectories: true)
        try Data(String(repeating: "not a database\n", count: 400).utf8).write(to: URL(fileURLWithPath: notSQLite))
        let broken = try TokenctlBinary.run(
            ["--verbose", "--store", notSQLite, "list"], environment: TokenctlStore.keyringEnvironment)
        #expect(broken.exitCode == 65, "\(broken.standardError)")
        #expect(broken.standardError.contains("tokenctl: cause: SQLite error 26"), "\(broken.standardError)")
        let plainBroken = try TokenctlBinary.run(["--store", notSQLite, "list"], environment: TokenctlStore.keyringEnvironment)
        #expect(plainBroken.exitCode == 65)
        #expect(!plainBroken.standardError.contains("tokenctl: cause: "), "causes only with --verbose")
    }

    @Test("completions offer values, not file names, where the value is not a path; app ids from $XDG_DATA_HOME")
    func completionsCompleteValues() throws {
        let bash = try TokenctlBinary.run(["__completion", "bash"]).standardOutput
        #expect(bash.contains("--account) COMPREPLY=(); return ;;"), "an account name is not a file")
        #expect(bash.contains("--min-ttl) COMPREPLY=(); return ;;"))
        #expect(bash.contains("--store) compopt -o filenames"), "a path completes file names, with trailing slashes")
        #expect(bash.contains("--kind) COMPREPLY=($(compgen -W \"refresh-token"))

        // The app-id completion, run by bash as completion would: lists the folders that hold a store.
        let data = try TemporaryDirectory(prefix: "tokenctl-completion")
        for (name, hasStore) in [("org.example.notes", true), ("org.example.empty", false)] {
            let folder = data.appending(name).path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            if hasStore { _ = FileManager.default.createFile(atPath: folder + "/tokens.sqlite", contents: Data()) }
        }
        let script = data.appending("completion.bash").path
        try bash.write(toFile: script, atomically: true, encoding: .utf8)
        let probe = """
            source \(script)
            COMP_WORDS=(tokenctl --app-id org.ex); COMP_CWORD=2; _tokenctl; printf '%s\\n' "${COMPREPLY[@]}"
            COMP_WORDS=(tokenctl get --account al); COMP_CWORD=3; _tokenctl; echo "account:${#COMPREPLY[@]}"
            """
        let result = try ChildProcess.run("/bin/bash", ["-c", probe], environment: ["XDG_DATA_HOME": data.url.path, "HOME": data.url.path])
        #expect(result.termination.succeeded, "\(result)")
        #expect(result.standardOutputText == "org.example.notes\naccount:0\n", "\(result.standardOutputText.debugDescription)")

        let zsh = try TokenctlBinary.run(["__completion", "zsh"]).standardOutput
        #expect(zsh.contains(":id:_tokenctl_app_ids'") && zsh.contains(":path:_files'"))
        #expect(!zsh.contains(":account:_files'"), "zsh completes accounts as files")
        let fish = try TokenctlBinary.run(["__completion", "fish"]).standardOutput
        #expect(fish.contains("-l account -x -d"), "fish: no file names for an account")
        #expect(fish.contains("-l store -r -F"))
    }

    @Test("the man page has EXIT STATUS (every code), ENVIRONMENT, FILES and EXAMPLES")
    func manPageSections() throws {
        let page = try TokenctlBinary.run(["__man"]).standardOutput
        for section in [".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH FILES", ".SH EXAMPLES", ".SH SEE ALSO"] {
            #expect(page.contains(section + "\n"), "no \(section)")
        }
        for status in [0, 1, 64, 65, 66, 69, 75, 77, 78] {
            #expect(page.contains(".TP\n\\fB\(status)\\fR\n"), "EXIT STATUS lacks \(status)")
        }
        for variable in ["TOKENCTL_STORE", "TOKENCTL_KEY_PROVIDER", "XDG_DATA_HOME", "XDG_STATE_HOME", "BROWSER"] {
            #expect(page.contains("\\fB\(variable)"), "ENVIRONMENT lacks \(variable)")
        }
        #expect(page.contains("\\-\\-raw"), "EXAMPLES show the bare secret for scripts")
        // troff reads Latin-1: every non-ASCII character must be a groff escape (\[u2014]).
        #expect(page.unicodeScalars.allSatisfy { $0.isASCII }, "the man page has raw non-ASCII characters")
    }

    @Test("the keyring item's label and status name the app id: the store's folder for --store …/APP-ID/tokens.sqlite")
    func labelNamesTheAppID() throws {
        let directory = try TemporaryDirectory(prefix: "tokenctl-appid")
        let path = directory.appending("org.example.notes-\(UUID().uuidString.prefix(6))/tokens.sqlite").path
        let appID = URL(fileURLWithPath: path).deletingLastPathComponent().lastPathComponent
        let put = try TokenctlBinary.run(
            ["--store", path, "put", "--account", "alice", "--kind", "generic"], environment: TokenctlStore.keyringEnvironment,
            stdin: "s3cret")
        #expect(put.exitCode == 0, "\(put.standardError)")
        let status = try TokenctlBinary.run(["--store", path, "--json", "status"], environment: TokenctlStore.keyringEnvironment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any])
        #expect(object["appID"] as? String == appID)
        let storeID = try #require(object["storeID"] as? String)
        let items = try PrivateKeyring.run("secret-tool", ["search", "--all", "store-id", storeID])
        #expect(items.standardOutput.contains("label = TokenStore data key — \(appID)\n"), "\(items.standardOutput)")
        let text = try TokenctlBinary.run(["--store", path, "status"], environment: TokenctlStore.keyringEnvironment)
        #expect(text.standardOutput.contains("app id               \(appID)\n"), "\(text.standardOutput)")

        // A path whose folder is not an app id keeps the "tokenctl" label.
        let other = try TokenctlStore()
        try other.put("x")
        #expect(try other.json(["status"]).object["appID"] as? String == "store")
        let odd = directory.appending("has space/tokens.sqlite").path
        _ = try TokenctlBinary.run(
            ["--store", odd, "put", "--account", "a", "--kind", "generic"], environment: TokenctlStore.keyringEnvironment, stdin: "x")
        let oddStatus = try TokenctlBinary.run(["--store", odd, "--json", "status"], environment: TokenctlStore.keyringEnvironment)
        #expect(oddStatus.standardOutput.contains("\"appID\" : \"tokenctl\"") || oddStatus.standardOutput.contains("\"appID\": \"tokenctl\""),
                "\(oddStatus.standardOutput)")
    }
}
