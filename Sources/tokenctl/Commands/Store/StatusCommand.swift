internal import CGlibcExtensions
import AuthSession
import TokenStore

/// `tokenctl status`: the store path, schema version, key provider and key state, and counts.
struct StatusCommand: TokenctlCommand {
    static let spec = CommandSpec(
        "status",
        abstract: "Show the store path, schema version, key provider and key state, and counts.",
        discussion: """
            Prints the store path, the schema version, the key provider and the state of the \
            data key (present, locked or missing), the store epoch in the file and in the key \
            provider, the item and account counts, the pending revocations and the file modes, and the \
            protection tier (hardware: sealed by this machine's TPM; softwareTPM: sealed by a software \
            TPM such as swtpm; keyring; portal; passphrase) with the reason a higher tier is not in use, \
            and whether the TPM ($TOKENSTORE_TPM_TCTI) can be used and is a software one. When the data key is missing or locked, says in \
            plain words what happened and the way forward.
            """)

    /// The key state `status` reports, with the plain-words explanation.
    enum KeyState: String {
        case present, locked, missing, none, unavailable, error
        /// The file records another key provider than the one in use, which cannot hold its
        /// key: a passphrase store opened without --passphrase-fd, or another kind. Nothing is lost.
        case needsPassphrase, otherProvider
        /// A TPM store whose key is present but the TPM cannot open it: no usable TPM, or another TPM.
        case tpmUnavailable, tpmMismatch
    }

    init(parsed: ParsedCommand) {}

    func run(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        let provider = try context.keyProvider(storePath: location.path)
        let inspection = try TokenStore.inspect(path: location.path)

        var keyState: KeyState
        var keyError: String?
        var tpmFailure: TokenStoreError?
        // The key where this provider keeps it: under one of its kind's slots (the first present).
        let references = inspection.keyReferences(for: provider.kind, appID: location.appID)
        let found = references.first { (try? provider.availability(of: $0)) == .present } ?? references.first
        if let reference = found ?? inspection.activeKeyReference(appID: location.appID) {
            do {
                switch try provider.availability(of: reference) {
                case .present: keyState = .present
                case .locked: keyState = .locked
                case .missing: keyState = .missing
                }
                tpmFailure = keyState == .present ? try Self.tpmRefusal(provider, inspection, reference) : nil
                if let tpmFailure {
                    keyState = tpmFailure.code == .tpmMismatch ? .tpmMismatch : .tpmUnavailable
                    keyError = "\(tpmFailure.message) [\(tpmFailure.code)]" + (tpmFailure.hint.map { " \($0)" } ?? "")
                }
            } catch let error as TokenStoreError where error.code == .secretServiceUnavailable {
                keyState = .unavailable
                keyError = error.code.rawValue
            } catch let error as TokenStoreError {
                keyState = .error
                keyError = "\(error.code.rawValue): \(error.message)"
            }
        } else {
            keyState = .none
        }
        var explanation = explain(keyState, inspection: inspection, error: keyError, provider: provider.name)
        if let recorded = inspection.keyProvider, recorded != provider.kind {
            // The provider in use does not hold the key: say which one does, never "missing, reset".
            let asksForPassphrase = recorded.traits?.capabilities.contains(.asksForPassphrase) == true
            keyState = asksForPassphrase ? .needsPassphrase : .otherProvider
            explanation = "This store's data key was made by the '\(recorded)' key provider, not '\(provider.name)', "
                + "the one used now, so this provider cannot have it; nothing is lost. "
                + "Run tokenctl with \(recorded.traits?.tokenctlOption ?? "--key-provider \(recorded)")."
                + " Do not reset the store (tokenctl reset refuses it)."
        }
        // The provider's epoch; the file's as recorded (checked only when the store opens).
        var providerEpoch: UInt64?
        var epochError: String?
        if let storeID = inspection.storeIdentifier, inspection.epoch != nil, keyState == .present || keyState == .none {
            do {
                providerEpoch = try provider.storeEpoch(storeID: storeID)
            } catch let error as TokenStoreError {
                epochError = error.code.rawValue
            }
        }
        if let file = inspection.epoch, let kept = providerEpoch, file < kept {
            explanation += "\nThe store file is older than its epoch in the key provider (file \(file), key provider "
                + "\(kept)): it was restored from an older copy, which undoes the logouts made since, so it will not open "
                + "(storeRolledBack). Restore the newest copy of the file; if there is none, start over with "
                + "'tokenctl reset --yes'."
        }
        let identity = Self.identity(of: provider)
        explanation += Self.modeNote(inspection.fileModes)
        // The protection tier of the key the file records (else of the provider used now), and
        // whether this machine's TPM could be used: asked even for a keyring store, never fatal.
        let tpmTCTI = provider.tpmTCTI ?? TPMKeyProvider.environmentTCTI()
        // A TPM the check above found unusable is not asked again (a silent one would cost a
        // second time-out): the probe's answer is that reason.
        let tpm = tpmFailure.flatMap { $0.code == .tpmUnavailable ? TPMAvailability.unavailable(tcti: tpmTCTI, reason: $0.message) : nil }
            ?? TPMKeyProvider.probe(tcti: tpmTCTI)
        let protection = StoreProtection.of(inspection.keyProvider ?? provider.kind, tpm: tpm)

        let lockout = Self.tpmLockout(inspection, tcti: tpmTCTI, tpm: tpm)
        let counts = inspection.counts
        let modes = inspection.fileModes
        // The endpoints discovery found for an `--issuer` server (kept sealed in the store by the
        // session commands): read only when the key is there, through a read-only open.
        let discovery = keyState == .present ? Self.discovery(context) : .none
        let document: JSONValue = [
            "path": .string(location.path),
            // The app id: given with --app-id, or the store's folder (it labels the keyring item).
            "appID": .string(location.appID),
            "schemaVersion": .int(inspection.schemaVersion),
            "supportedSchemaVersion": .int(inspection.supportedSchemaVersion),
            "pendingMigrations": .array(inspection.pendingMigrations.map(Format.migration)),
            "storeID": Format.optional(inspection.storeIdentifier),
            "keyID": Format.optional(inspection.activeKeyIdentifier),
            "keyProvider": .string(provider.name),
            // The kind the file records as holding its key (schema 10; not checked without the key).
            "recordedKeyProvider": Format.optional(inspection.keyProvider?.rawValue),
            // The access policy the file records (schema 15; not checked without the key), whether it
            // records a lock for every process (tokenctl lock), and what can lock it.
            "accessPolicy": Format.optional(inspection.accessPolicy?.name),
            "locked": .bool(Self.locked(inspection)),
            "lockSource": .string(Self.lockSource(inspection.accessPolicy)),
            // The ways to the data key (as recorded; never a secret).
            "keySlots": SlotKinds.document(inspection.keySlots),
            // With a TPM + PIN slot: the TPM's dictionary-attack counter and its owner's settings.
            "tpmLockout": lockout.json,
            "discovery": discovery.json,
            // Which program serves the keys (the owner of org.freedesktop.secrets), when known.
            "provider": [
                "name": .string(identity?.name ?? "none"),
                "version": Format.optional(identity?.version),
                "executable": Format.optional(identity?.executable),
            ],
            "keyState": .string(keyState.rawValue),
            "keyStateExplanation": .string(explanation),
            "protection": .string(protection.tier.rawValue),
            "protectionReason": .string(protection.reason),
            "tpm": ["available": .bool(tpm.available), "reason": .string(tpm.reason), "simulator": .bool(tpm.simulator)],
            "epoch": [
                "file": inspection.epoch.map { .int(Int($0)) } ?? .null,
                "keyProvider": providerEpoch.map { .int(Int($0)) } ?? .null,
            ],
            "counts": [
                "items": .int(counts.items), "accounts": .int(counts.accounts),
                "pendingRevocations": .int(counts.pendingRevocations),
                "failedRevocations": .int(inspection.failedRevocations),
                "credentialStates": .int(counts.credentialStates),
                "historyEntries": .int(inspection.historyEntries),
            ],
            // This process: core dumps and tracing by the user's other processes are off.
            "processDumpable": .bool(tokenstore_is_dumpable() != 0),
            "fileModes": [
                "directory": Format.optional(modes.directory.map { Format.mode($0) }),
                "database": Format.optional(modes.database.map { Format.mode($0) }),
                "wal": Format.optional(modes.wal.map { Format.mode($0) }),
                "shm": Format.optional(modes.shm.map { Format.mode($0) }),
            ],
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["store", location.path])
            table.append(["app id", location.appID])
            let pending = inspection.pendingMigrations.map { String($0.version) }
            table.append([
                "schema version",
                "\(inspection.schemaVersion) (this tokenctl knows \(inspection.supportedSchemaVersion); "
                    + (pending.isEmpty ? "nothing pending)" : "pending: \(pending.joined(separator: ", ")))"),
            ])
            table.append(["store id", inspection.storeIdentifier ?? "-"])
            discovery.appendRows(to: &table)
            // The program behind it, unless that is the provider itself (passphrase, portal).
            let program = identity?.displayName ?? "none running"
            table.append(["key provider", program == provider.name ? provider.name : "\(provider.name) (\(program))"])
            table.append(["recorded provider", inspection.keyProvider?.rawValue ?? "-"])
            table.append([
                "access policy",
                (inspection.accessPolicy?.name ?? "-") + (inspection.lockedEverywhere ? " (locked for every process)" : Self.locked(inspection) ? " (locked with the session)" : " (unlocked)")
                    + ", lock source: " + Self.lockSource(inspection.accessPolicy),
            ])
            table.append(["key id", inspection.activeKeyIdentifier ?? "-"])
            let slots = inspection.keySlots.map { "\($0.id) \(SlotKinds.name($0.kind))" }
            table.append(["key slots", slots.isEmpty ? "-" : slots.joined(separator: ", ")])
            if let text = lockout.text { table.append(["TPM PIN lockout", text]) }
            table.append(["key state", keyState.rawValue])
            table.append(["protection", protection.tier.rawValue + (protection.reason.isEmpty ? "" : " (\(protection.reason))")])
            table.append([
                "epoch",
                "file \(inspection.epoch.map { String($0) } ?? "-"), key provider "
                    + (providerEpoch.map { String($0) } ?? epochError.map { "unknown (\($0))" } ?? "-"),
            ])
            table.append(["items", String(counts.items)])
            table.append(["accounts", String(counts.accounts)])
            table.append([
                "pending revocations",
                "\(counts.pendingRevocations)"
                    + (inspection.failedRevocations > 0 ? " (\(inspection.failedRevocations) refused by the server)" : ""),
            ])
            table.append(["credential states", String(counts.credentialStates)])
            table.append(["history entries", String(inspection.historyEntries)])
            table.append([
                "file modes",
                "dir \(Format.mode(modes.directory))  db \(Format.mode(modes.database))  "
                    + "wal \(Format.mode(modes.wal))  shm \(Format.mode(modes.shm))",
            ])
            return table.rendered() + "\n" + explanation + "\n"
        }
        return .ok
    }

    /// Why this TPM cannot open a TPM store whose sealed key is present (`tpmUnavailable`,
    /// `tpmMismatch`: what `list` or `get` would throw), or nil when it can, or when the store is
    /// not a TPM store opened with a TPM provider (the key never leaves the TPM: no unseal).
    private static func tpmRefusal(
        _ provider: any KeyProvider, _ inspection: StoreInspection, _ reference: DataKeyReference
    ) throws -> TokenStoreError? {
        guard let tcti = provider.tpmTCTI,
            (inspection.keyProvider ?? provider.kind).traits?.capabilities.contains(.sealsWithTPM) == true
        else { return nil }
        do {
            _ = try TPMKeyProvider(tcti: tcti).verifySealedKey(reference)
            return nil
        } catch let error as TokenStoreError where [.tpmUnavailable, .tpmMismatch].contains(error.code) {
            return error
        }
    }

    /// A line about modes looser than 0700/0600, which status (it only reads) leaves as they are.
    private static func modeNote(_ modes: StoreInspection.FileModes) -> String {
        var loose: [String] = []
        if let mode = modes.directory, mode & 0o077 != 0 { loose.append("the directory is \(Format.mode(mode))") }
        if let mode = modes.database, mode & 0o777 != 0o600 { loose.append("the database file is \(Format.mode(mode))") }
        guard !loose.isEmpty else { return "" }
        return "\n" + loose.joined(separator: " and ").capitalizedFirst
            + ": the next command that writes makes them 0700/0600 (status only reads and changes nothing)."
    }

    /// The program behind the key provider: the passphrase provider, or the owner of
    /// org.freedesktop.secrets (nil when no Secret Service runs or the bus cannot be asked).
    private static func identity(of provider: any KeyProvider) -> KeyProviderIdentity? {
        if let identity = provider.kind.traits?.identity { return identity }
        return (try? KeyProviderIdentity.secretService()) ?? nil
    }

    /// What the key state means for the user, and the way forward, in plain words.
    private func explain(_ state: KeyState, inspection: StoreInspection, error: String?, provider: String) -> String {
        // Where the key lives, as the provider keeps it (an app's own provider: the Secret Service).
        let keyHome = KeyProviderKind(rawValue: provider).traits?.keyHome ?? "the Secret Service"
        let sealed = inspection.counts.items + inspection.counts.pendingRevocations + inspection.counts.credentialStates
        switch state {
        case .present:
            return "The data key is in \(keyHome) and can be read: the store opens normally."
        case .locked:
            return "The keyring holding the data key is locked, so nothing in the store can be read or written "
                + "until it is unlocked. Nothing is lost. Unlock it with 'tokenctl unlock' (shows the desktop's "
                + "unlock prompt) or by logging in to the desktop session."
        case .missing:
            return "The data key is missing from \(keyHome): the \(sealed) sealed row(s) of this store "
                + "cannot be opened by anyone. Either restore the keyring that held the key (for example the "
                + "~/.local/share/keyrings folder from a backup), or start over with 'tokenctl reset --yes', which "
                + "deletes the stored secrets and keeps the credential-state history (every user becomes revoked, "
                + "reason keyLost)."
        case .none where sealed > 0:
            return "The store holds \(sealed) sealed row(s) but records no active data key: its key records are "
                + "damaged, or the key was lost. Run 'tokenctl list' to find out which before anything else: when "
                + "the key is still in the keyring, restore the store file from a backup; do not reset it."
        case .none:
            return "The store has no data key yet: the first command that writes to it (put, login) makes one."
        case .unavailable:
            return "No Secret Service answered on the session bus, so the data key cannot be checked or used. "
                + "Start one, e.g. 'gnome-keyring-daemon --start --components=secrets', with "
                + "DBUS_SESSION_BUS_ADDRESS naming the session bus."
        case .error:
            return "The Secret Service could not tell whether the data key is there (\(error ?? "unknown error"))."
        case .needsPassphrase, .otherProvider:
            return "This store's data key is kept by another key provider than '\(provider)'; nothing is lost."
        case .tpmUnavailable, .tpmMismatch:
            // The same typed reason the commands that open the store give, and the way back.
            return "The data key is in \(keyHome), but this store cannot be opened: \(error ?? "unknown error") "
                + "Nothing in the store is lost."
        }
    }
}

extension String {
    /// The string with its first character upper-cased.
    fileprivate var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}

extension StatusCommand {
    /// The TPM's dictionary-attack state for a store with a TPM + PIN slot (nil: no such slot).
    enum TPMLockout {
        case none
        case unreadable(String)
        case state(TPMLockoutState)

        var json: JSONValue {
            switch self {
            case .none: return .null
            case .unreadable(let reason): return ["readable": .bool(false), "reason": .string(reason)]
            case .state(let state):
                return [
                    "readable": .bool(true),
                    "failures": .int(Int(state.counter)), "maxTries": .int(Int(state.maxTries)), "triesLeft": .int(state.triesLeft),
                    "lockedOut": .bool(state.isLockedOut),
                    "intervalSeconds": .int(Int(state.interval)), "lockoutRecoverySeconds": .int(Int(state.lockoutRecovery)),
                    "recoverySeconds": state.isLockedOut ? (state.recoveryTime.map { .int(Int($0.components.seconds)) } ?? .null) : .int(0),
                ]
            }
        }

        var text: String? {
            switch self {
            case .none: return nil
            case .unreadable(let reason): return "unknown (\(reason))"
            case .state(let state):
                let forgiving = state.interval > 0 ? "one failure forgiven every \(state.interval) s" : "failures never forgiven by themselves"
                let now = state.isLockedOut
                    ? "locked out" + (state.recoveryTime.map { ", for up to \($0.components.seconds) s" } ?? ", until its owner ends it")
                    : "\(state.triesLeft) wrong PINs left"
                return "\(state.counter) of \(state.maxTries) failures counted (\(now)); \(forgiving)"
            }
        }
    }

    /// Reads it when the store has a TPM + PIN slot and the TPM answered the probe.
    static func tpmLockout(_ inspection: StoreInspection, tcti: String, tpm: TPMAvailability) -> TPMLockout {
        guard inspection.keySlots.contains(where: { $0.kind == .tpmPIN }) else { return .none }
        guard tpm.available else { return .unreadable(tpm.reason) }
        do {
            return .state(try TPMPINKeyProvider.lockoutState(tcti: tcti))
        } catch {
            return .unreadable((error as? TokenStoreError)?.message ?? "\(error)")
        }
    }

    /// What can lock the store: `explicit` (store.lock(), tokenctl lock) for the policies that
    /// follow no session; for whenUnlocked, what tells this process when the desktop session
    /// locks: `logind` or `screensaver`, `none` when neither answers (such a store is not
    /// opened: lockSourceUnavailable).
    static func lockSource(_ policy: AccessPolicy?) -> String {
        policy == .whenUnlocked ? TokenStore.sessionLockSource ?? "none" : "explicit"
    }

    /// Whether the store is locked: for every process (tokenctl lock), or, whenUnlocked, with the session.
    static func locked(_ inspection: StoreInspection) -> Bool {
        inspection.lockedEverywhere || (inspection.accessPolicy == .whenUnlocked && TokenStore.isSessionLocked)
    }
}
