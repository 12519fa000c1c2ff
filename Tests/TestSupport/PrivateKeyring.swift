import Foundation

/// Test helpers for the private gnome-keyring that `scripts/with-keyring` starts.
///
/// Everything here talks to the session bus named by `DBUS_SESSION_BUS_ADDRESS`, which inside
/// `scripts/with-keyring` is a throwaway bus; nothing here ever looks for the user's own bus.
/// Tests that need the keyring check ``isAvailable`` and are skipped with ``skipReason``
/// otherwise, so a plain `swift test` outside the wrapper never fails on them.
///
/// The helpers shell out to `gdbus` and `secret-tool` (never `secret-tool lock`, which may
/// not return) and unlock through gnome-keyring's control socket, the way PAM does, because
/// that works with no display and no prompter.
public enum PrivateKeyring {
    /// The environment variable `scripts/with-keyring` sets to the keyring's throwaway password.
    public static let passwordVariable = "TOKENSTORE_TEST_KEYRING_PASSWORD"

    /// True inside `scripts/with-keyring`: a session bus and the keyring password are set.
    public static var isAvailable: Bool {
        let environment = ProcessInfo.processInfo.environment
        return !(environment["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty
            && !(environment[passwordVariable] ?? "").isEmpty
    }

    /// Why keyring tests are skipped when ``isAvailable`` is false.
    public static let skipReason =
        "needs the private keyring: run the tests as `scripts/with-keyring swift test`"

    /// The Secret Service under test: `gnome-keyring` (scripts/with-keyring, or
    /// scripts/providers/gnome-keyring), `keepassxc` or `kwallet` (scripts/providers/*, which
    /// set TOKENSTORE_TEST_PROVIDER).
    public static var provider: String {
        ProcessInfo.processInfo.environment["TOKENSTORE_TEST_PROVIDER"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "gnome-keyring"
    }

    /// Whether ``unlockDefaultCollection()`` works with no display. Only gnome-keyring has a
    /// headless unlock after a lock (its control socket); KeePassXC and KWallet (whose wallet
    /// a lock closes) ask for the password in a dialog.
    public static var canUnlockHeadless: Bool { provider == "gnome-keyring" }

    /// Why a test that unlocks after locking is skipped on this provider.
    public static var noHeadlessUnlockReason: String {
        "\(provider) has no headless unlock after a lock (a password dialog)"
    }

    /// The throwaway password of the private keyring, if any.
    public static var password: String? {
        ProcessInfo.processInfo.environment[passwordVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    // MARK: - The default collection

    /// The object path the `default` alias points at (gnome-keyring: `…/collection/login`).
    public static func defaultCollectionPath() throws -> String {
        let result = try gdbus(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.ReadAlias", ["default"])
        guard let path = firstQuoted(result.standardOutput), path != "/" else {
            throw PrivateKeyringError("the Secret Service has no default collection: \(result.standardOutput)")
        }
        return path
    }

    /// Whether the default collection is locked, as the service says now.
    public static func isDefaultCollectionLocked() throws -> Bool {
        let result = try gdbus(
            try defaultCollectionPath(), "org.freedesktop.DBus.Properties.Get",
            ["org.freedesktop.Secret.Collection", "Locked"])
        if result.standardOutput.contains("true") { return true }
        if result.standardOutput.contains("false") { return false }
        throw PrivateKeyringError("unexpected Locked answer: \(result.standardOutput)")
    }

    /// Locks the default collection through `org.freedesktop.Secret.Service.Lock` and waits
    /// until the service reports it locked. KeePassXC answers Lock with a prompt, which locks
    /// the database without a dialog when called.
    public static func lockDefaultCollection() throws {
        let path = try defaultCollectionPath()
        let answer = try gdbus("/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock", ["['\(path)']"])
        if let prompt = answer.standardOutput.split(separator: "'").dropLast().last.map(String.init),
            prompt.hasPrefix("/org/freedesktop/secrets/prompt/")
        {
            _ = try gdbus(prompt, "org.freedesktop.Secret.Prompt.Prompt", [""])
        }
        try waitForLockState(true)
    }

    /// Stops the Secret Service and starts it again (its items must survive): the provider
    /// script's restart (TOKENSTORE_TEST_PROVIDER_RESTART), or under scripts/with-keyring a
    /// `gnome-keyring-daemon --replace` unlocked with the throwaway password.
    public static func restartSecretService() throws {
        let environment = ProcessInfo.processInfo.environment
        if let restart = environment["TOKENSTORE_TEST_PROVIDER_RESTART"], !restart.isEmpty {
            let words = restart.split(separator: " ").map(String.init)
            let result = try run(words[0], Array(words.dropFirst()), timeout: .seconds(90))
            guard result.status == 0 else { throw PrivateKeyringError("the provider restart failed: \(result)") }
            return
        }
        guard let password else { throw PrivateKeyringError("\(passwordVariable) is not set") }
        let result = try run(
            "gnome-keyring-daemon", ["--replace", "--unlock", "--components=secrets", "--daemonize"],
            input: Data(password.utf8), timeout: .seconds(20))
        guard result.status == 0 else { throw PrivateKeyringError("gnome-keyring-daemon --replace failed: \(result)") }
        try waitForLockState(false)
    }

    /// Unlocks the default ("login") collection with the throwaway password, through
    /// gnome-keyring's control socket (`$XDG_RUNTIME_DIR/keyring/control`, the PAM path),
    /// and waits until the service reports it unlocked.
    public static func unlockDefaultCollection() throws {
        guard canUnlockHeadless else { throw PrivateKeyringError(noHeadlessUnlockReason) }
        guard let password else { throw PrivateKeyringError("\(passwordVariable) is not set") }
        try unlockThroughControlSocket(password: password)
        try waitForLockState(false)
    }

    /// The process id of the program that owns `org.freedesktop.secrets` on the session bus.
    public static func secretServicePID() throws -> Int32 {
        let result = try run(
            "gdbus",
            ["call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
             "--method", "org.freedesktop.DBus.GetConnectionUnixProcessID", "org.freedesktop.secrets"],
            timeout: .seconds(15))
        let digits = result.standardOutput.split(whereSeparator: { !$0.isNumber }).last
        guard result.status == 0, let digits, let pid = Int32(digits) else {
            throw PrivateKeyringError("no process owns org.freedesktop.secrets: \(result)")
        }
        return pid
    }

    // MARK: - Items

    /// Deletes every (unlocked) item whose `store-id` (key) or `epoch-store-id` (store epoch) attribute is `storeID`.
    public static func clearItems(storeID: String) throws {
        // The key items, then the store-epoch items (`epoch-store-id`).
        for attribute in ["store-id", "epoch-store-id"] {
            let result = try run("secret-tool", ["clear", attribute, storeID])
            guard result.status == 0 || result.standardError.isEmpty else {
                throw PrivateKeyringError("secret-tool clear failed: \(result.standardError)")
            }
        }
    }

    /// How many items, locked or not, carry these attributes.
    public static func itemCount(attributes: [String: String]) throws -> Int {
        let pairs = attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }
        let result = try run("secret-tool", ["search", "--all"] + pairs)
        // secret-tool prints one "[/org/freedesktop/secrets/collection/…/N]" header per item.
        return result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("[/") }.count
            + result.standardError.split(separator: "\n").filter { $0.hasPrefix("[/") }.count
    }

    /// Stores an arbitrary item with `secret-tool store`, bypassing the code under test:
    /// for planting a key of the wrong length or a second item. Pass the schema name as the
    /// `xdg:schema` attribute to make the item match a libsecret schema search.
    /// - Parameter collection: an alias (`default`, `session`) or an object path.
    public static func storeRawItem(
        attributes: [String: String], secret: [UInt8], label: String = "TokenStore test item",
        collection: String = "default"
    ) throws {
        let pairs = attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }
        // KWallet now and then answers secret-tool's CreateItem with "Can't find session" for the
        // session it has just opened for it, while other clients come and go (seen once in the
        // provider matrix): the library's own calls open a new session and retry
        // (SecretServiceKeyProvider.reconnecting), and so does this plant, twice at most. Its
        // create replaces an item with these attributes, the one a failed create may have left.
        for attempt in 1...3 {
            let result = try run(
                "secret-tool", ["store", "--label=\(label)", "--collection=\(collection)"] + pairs,
                input: Data(secret))
            if result.status == 0 { return }
            guard attempt < 3, result.standardError.contains("Can't find session") else {
                throw PrivateKeyringError("secret-tool store failed (\(result.status)): \(result.standardError)")
            }
        }
    }

    // MARK: - Child processes

    /// What session bus a child process gets.
    public enum ChildBus: Sendable {
        /// No session bus at all: `DBUS_SESSION_BUS_ADDRESS` and `DISPLAY` unset and an empty
        /// `XDG_RUNTIME_DIR`, so GLib can neither find nor autolaunch one.
        case none
        /// A fresh private bus (its own `dbus-daemon`) on which nothing provides
        /// `org.freedesktop.secrets` and nothing can be activated.
        case withoutSecretService
        /// A fresh private bus with its own unlocked Secret Service of the provider under test
        /// (`scripts/with-keyring`, or the same `scripts/providers/*` script):
        /// for tests that lock the keyring and must not disturb tests running beside them.
        case ownPrivateKeyring
    }

    /// Runs `executable` with `arguments` in a child process on the given bus.
    public static func runChild(
        on bus: ChildBus, executable: String, arguments: [String],
        environment extra: [String: String] = [:], timeout: Duration = .seconds(120)
    ) throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["SECRET_BACKEND"] = nil
        environment["NO_COLOR"] = "1"
        for (key, value) in extra { environment[key] = value }

        switch bus {
        case .none:
            let runtime = try TemporaryDirectory(prefix: "tokenstore-nobus")
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: runtime.path)
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            environment["DISPLAY"] = nil
            environment["WAYLAND_DISPLAY"] = nil
            environment["XDG_RUNTIME_DIR"] = runtime.path
            return try withExtendedLifetime(runtime) {
                try run(executable, arguments, environment: environment, timeout: timeout)
            }
        case .withoutSecretService:
            let directory = try TemporaryDirectory(prefix: "tokenstore-emptybus")
            let config = directory.appending("session.conf")
            try emptyBusConfiguration(socketDirectory: directory.path)
                .write(to: config, atomically: true, encoding: .utf8)
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            return try withExtendedLifetime(directory) {
                try run(
                    "dbus-run-session", ["--config-file=\(config.path)", "--", executable] + arguments,
                    environment: environment, timeout: timeout)
            }
        case .ownPrivateKeyring:
            // A session of the same provider as this one (scripts/providers/*), else with-keyring.
            let script = environment["TOKENSTORE_TEST_PROVIDER_SCRIPT"].flatMap { $0.isEmpty ? nil : $0 }
                ?? repositoryRoot.appendingPathComponent("scripts/with-keyring").path
            return try run(script, [executable] + arguments, environment: environment, timeout: timeout)
        }
    }

    /// The path of the running executable (for a test binary that re-runs itself).
    public static func currentExecutable() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// A D-Bus session configuration with no service directories: nothing can be activated.
    static func emptyBusConfiguration(socketDirectory: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <keep_umask/>
          <listen>unix:dir=\(socketDirectory)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
    }

    // MARK: - Processes

    /// The outcome of a finished child process.
    public struct ProcessResult: Sendable, CustomStringConvertible {
        /// The exit status, or 128 + the signal that ended it.
        public let status: Int32
        public let standardOutput: String
        public let standardError: String
        public var description: String { "exit \(status)\n--- stdout\n\(standardOutput)\n--- stderr\n\(standardError)" }
    }

    /// Runs a program (looked up on `PATH`), feeding `input` on stdin (or nothing: stdin is
    /// /dev/null), through ``ChildProcess``: its own process group, stopped (the whole group)
    /// after `timeout`, which then throws ``ChildProcess/TimedOut``.
    public static func run(
        _ program: String, _ arguments: [String], input: Data? = nil,
        environment: [String: String]? = nil, timeout: Duration = .seconds(30)
    ) throws -> ProcessResult {
        let result = try ChildProcess.run(program, arguments, environment: environment, input: input, timeout: timeout)
        // Lossy decoding: secret-tool prints secrets, which may be arbitrary bytes.
        return ProcessResult(
            status: result.termination.shellStatus, standardOutput: result.standardOutputText,
            standardError: result.standardErrorText)
    }

    // MARK: - Private

    private static func gdbus(_ objectPath: String, _ method: String, _ arguments: [String]) throws
        -> ProcessResult
    {
        let result = try run(
            "gdbus",
            ["call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", objectPath,
             "--timeout", "10", "--method", method] + arguments,
            timeout: .seconds(15))
        guard result.status == 0 else {
            throw PrivateKeyringError("gdbus \(method) failed: \(result)")
        }
        return result
    }

    private static func waitForLockState(_ locked: Bool) throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while try isDefaultCollectionLocked() != locked {
            guard ContinuousClock.now < deadline else {
                throw PrivateKeyringError("the default collection did not become \(locked ? "locked" : "unlocked")")
            }
            usleep(20_000)
        }
    }

    private static func firstQuoted(_ text: String) -> String? {
        guard let start = text.firstIndex(of: "'") else { return nil }
        let rest = text[text.index(after: start)...]
        guard let end = rest.firstIndex(of: "'") else { return nil }
        return String(rest[..<end])
    }

    /// gnome-keyring's control protocol (daemon/control): a NUL credentials byte, then a
    /// packet `u32 length, u32 op (1 = unlock), u32 password length, password`, all big
    /// endian; the answer is `u32 length (8), u32 result (0 = ok, 1 = denied, 2 = failed)`.
    private static func unlockThroughControlSocket(password: String) throws {
        guard let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] else {
            throw PrivateKeyringError("XDG_RUNTIME_DIR is not set")
        }
        let path = runtime + "/keyring/control"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PrivateKeyringError("socket() failed: errno \(errno)") }
        defer { close(fd) }

        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { throw PrivateKeyringError("control socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw PrivateKeyringError("connect(\(path)) failed: errno \(errno)") }

        func bigEndian(_ value: Int) -> [UInt8] {
            withUnsafeBytes(of: UInt32(value).bigEndian) { Array($0) }
        }
        let secret = Array(password.utf8)
        let body = bigEndian(1) + bigEndian(secret.count) + secret
        let packet: [UInt8] = [0] + bigEndian(body.count + 4) + body
        try writeAll(fd, packet)

        var answer = [UInt8](repeating: 0, count: 8)
        var received = 0
        while received < answer.count {
            let n = answer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + received, $0.count - received) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw PrivateKeyringError("the control socket closed early") }
            received += n
        }
        let result = answer[4..<8].reduce(0) { $0 << 8 | Int($1) }
        guard result == 0 else {
            throw PrivateKeyringError("gnome-keyring refused to unlock (control result \(result))")
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + sent, $0.count - sent) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw PrivateKeyringError("writing to the control socket failed: errno \(errno)") }
            sent += n
        }
    }
}

/// A failure of a test helper (not of the code under test).
public struct PrivateKeyringError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
