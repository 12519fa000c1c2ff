import Foundation
import TokenStore

/// `status`, `list`, `get`, `put`, `delete`, `state`, `history`, `pending`: looking inside a
/// store and editing its items. Only `put` creates a store; the others need an existing one.
enum StoreCommands {
    // MARK: status

    /// The key state `status` reports, with the plain-words explanation.
    enum KeyState: String {
        case present, locked, missing, none, unavailable, error
    }

    static func status(_ context: CommandContext) throws -> ExitCode {
        let location = try context.requireExistingStore()
        let provider = try context.keyProvider(storePath: location.path)
        let inspection = try TokenStore.inspect(path: location.path)

        let keyState: KeyState
        var keyError: String?
        if let reference = inspection.activeKeyReference(appID: location.appID) {
            do {
                switch try provider.availability(of: reference) {
                case .present: keyState = .present
                case .locked: keyState = .locked
                case .missing: keyState = .missing
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
        let explanation = explain(keyState, inspection: inspection, error: keyError)

        let counts = inspection.counts
        let modes = inspection.fileModes
        let document: JSONValue = [
            "path": .string(location.path),
            "schemaVersion": .int(inspection.schemaVersion),
            "supportedSchemaVersion": .int(inspection.supportedSchemaVersion),
            "pendingMigrations": .array(inspection.pendingMigrations.map(MaintenanceCommands.json)),
            "storeID": Format.optional(inspection.storeIdentifier),
            "keyID": Format.optional(inspection.activeKeyIdentifier),
            "keyProvider": .string(provider.name),
            "keyState": .string(keyState.rawValue),
            "keyStateExplanation": .string(explanation),
            "counts": [
                "items": .int(counts.items), "accounts": .int(counts.accounts),
                "pendingRevocations": .int(counts.pendingRevocations),
                "failedRevocations": .int(inspection.failedRevocations),
                "credentialStates": .int(counts.credentialStates),
                "historyEntries": .int(inspection.historyEntries),
            ],
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
            let pending = inspection.pendingMigrations.map { String($0.version) }
            table.append([
                "schema version",
                "\(inspection.schemaVersion) (this tokenctl knows \(inspection.supportedSchemaVersion); "
                    + (pending.isEmpty ? "nothing pending)" : "pending: \(pending.joined(separator: ", ")))"),
            ])
            table.append(["store id", inspection.storeIdentifier ?? "-"])
            table.append(["key provider", provider.name])
            table.append(["key id", inspection.activeKeyIdentifier ?? "-"])
            table.append(["key state", keyState.rawValue])
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

    /// What the key state means for the user, and the way forward, in plain words.
    static func explain(_ state: KeyState, inspection: StoreInspection, error: String?) -> String {
        let sealed = inspection.counts.items + inspection.counts.pendingRevocations + inspection.counts.credentialStates
        switch state {
        case .present:
            return "The data key is in the Secret Service and can be read: the store opens normally."
        case .locked:
            return "The keyring holding the data key is locked, so nothing in the store can be read or written "
                + "until it is unlocked. Nothing is lost. Unlock it with 'tokenctl unlock' (shows the desktop's "
                + "unlock prompt) or by logging in to the desktop session."
        case .missing:
            return "The data key is missing from the Secret Service: the \(sealed) sealed row(s) of this store "
                + "cannot be opened by anyone. Either restore the keyring that held the key (for example the "
                + "~/.local/share/keyrings folder from a backup), or start over with 'tokenctl reset --yes', which "
                + "deletes the stored secrets and keeps the credential-state history (every user becomes revoked, "
                + "reason keyLost)."
        case .none:
            return "The store has no data key yet: the first command that writes to it (put, login) makes one."
        case .unavailable:
            return "No Secret Service answered on the session bus, so the data key cannot be checked or used. "
                + "Start one, e.g. 'gnome-keyring-daemon --start --components=secrets', with "
                + "DBUS_SESSION_BUS_ADDRESS naming the session bus."
        case .error:
            return "The Secret Service could not tell whether the data key is there (\(error ?? "unknown error"))."
        }
    }

    // MARK: list

    static func list(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        var items: [ItemInfo] = []
        try store.forEachItem { items.append($0) }
        items.sort { ($0.key.service, $0.key.account, $0.key.kind.rawValue) < ($1.key.service, $1.key.account, $1.key.kind.rawValue) }
        context.emit(["count": .int(items.count), "items": .array(items.map(json))]) {
            var table = TextTable(header: ["SERVICE", "ACCOUNT", "KIND", "CREATED", "UPDATED", "FINGERPRINT", "BYTES"])
            table.alignments = [.left, .left, .left, .left, .left, .left, .right]
            for item in items {
                table.append([
                    item.key.service, item.key.account, item.key.kind.rawValue, Format.date(item.createdAt),
                    Format.date(item.updatedAt), item.fingerprint, String(item.byteCount),
                ])
            }
            return items.isEmpty ? "No items.\n" : table.rendered()
        }
        return .ok
    }

    static func json(_ item: ItemInfo) -> JSONValue {
        [
            "service": .string(item.key.service), "account": .string(item.key.account),
            "kind": .string(item.key.kind.rawValue), "label": Format.optional(item.attributes.label),
            "createdAt": .string(Format.date(item.createdAt)), "updatedAt": .string(Format.date(item.updatedAt)),
            "expiresAt": Format.date(item.attributes.expiresAt), "scopes": Format.strings(item.attributes.scopes),
            "fingerprint": .string(item.fingerprint), "byteCount": .int(item.byteCount),
        ]
    }

    // MARK: get

    static func get(_ context: CommandContext) throws -> ExitCode {
        let key = try itemKey(context)
        let store = try context.openStore()
        guard let item = try store.item(for: key) else {
            throw CommandFailure(.failure, "no item with this account, kind and service", hint: "'tokenctl list' shows the items")
        }
        let reveal = context.command.hasFlag("reveal")
        var document: [String: JSONValue] = [
            "service": .string(item.key.service), "account": .string(item.key.account),
            "kind": .string(item.key.kind.rawValue), "label": Format.optional(item.attributes.label),
            "createdAt": .string(Format.date(item.createdAt)), "updatedAt": .string(Format.date(item.updatedAt)),
            "expiresAt": Format.date(item.attributes.expiresAt), "scopes": Format.strings(item.attributes.scopes),
            "fingerprint": .string(item.secret.fingerprint), "byteCount": .int(item.secret.count),
        ]
        var text: String?
        if reveal {
            RevealWarning.emitIfNeeded(on: context.console)
            // The secret becomes a String only here, at the edge, because the user asked for it.
            text = item.secret.stringValue()
            document["secret"] = Format.optional(text)
            document["secretBase64"] = .string(Data(item.secret.copyBytes()).base64EncodedString())
        }
        context.emit(.object(document)) {
            var table = TextTable(header: nil)
            table.append(["service", item.key.service])
            table.append(["account", item.key.account])
            table.append(["kind", item.key.kind.rawValue])
            if let label = item.attributes.label { table.append(["label", label]) }
            table.append(["created", Format.date(item.createdAt)])
            table.append(["updated", Format.date(item.updatedAt)])
            if let expiresAt = item.attributes.expiresAt { table.append(["expires", Format.date(expiresAt)]) }
            if !item.attributes.scopes.isEmpty { table.append(["scopes", item.attributes.scopes.joined(separator: " ")]) }
            table.append(["fingerprint", item.secret.fingerprint])
            table.append(["bytes", String(item.secret.count)])
            if reveal {
                if let text {
                    table.append(["secret", text])
                } else {
                    table.append(["secret (base64)", Data(item.secret.copyBytes()).base64EncodedString()])
                }
            }
            return table.rendered()
        }
        return .ok
    }

    // MARK: put

    static func put(_ context: CommandContext) throws -> ExitCode {
        let key = try itemKey(context)
        if context.console.standardInputIsTerminal {
            context.console.writeError("tokenctl: reading the secret from stdin; end it with Ctrl-D\n")
        }
        let secret = try SecretInput.standardInput()
        let store = try context.openStore(create: true)
        try store.set(secret, for: key, attributes: ItemAttributes(label: context.command.value("label")))
        let document: JSONValue = [
            "stored": true, "service": .string(key.service), "account": .string(key.account),
            "kind": .string(key.kind.rawValue), "fingerprint": .string(secret.fingerprint),
            "byteCount": .int(secret.count),
        ]
        context.emit(document) { "Stored \(key.kind.rawValue) (\(secret.count) bytes, fingerprint \(secret.fingerprint)).\n" }
        return .ok
    }

    // MARK: delete

    static func delete(_ context: CommandContext) throws -> ExitCode {
        let key = try itemKey(context)
        let store = try context.openStore()
        // Counting, not reading: a damaged row must stay deletable.
        let before = try store.counts().items
        try store.delete(key)
        let deleted = try store.counts().items < before
        context.emit(["deleted": .bool(deleted), "service": .string(key.service), "account": .string(key.account), "kind": .string(key.kind.rawValue)]) {
            deleted ? "Deleted.\n" : "Nothing to delete: no such item.\n"
        }
        return .ok
    }

    // MARK: state, history

    static func state(_ context: CommandContext) throws -> ExitCode {
        let userID = try userIDArgument(context)
        let store = try context.openStore()
        let state = try store.credentialState(forUserID: userID)
        context.emit(["state": .string(state.rawValue)]) { state.rawValue + "\n" }
        return .ok
    }

    static func history(_ context: CommandContext) throws -> ExitCode {
        let userID = try userIDArgument(context)
        let store = try context.openStore()
        let state = try store.credentialState(forUserID: userID)
        let transitions = try store.credentialStateHistory(forUserID: userID)
        let document: JSONValue = [
            "state": .string(state.rawValue),
            "transitions": .array(transitions.map { transition in
                [
                    "date": .string(Format.date(transition.date)), "from": .string(transition.from.rawValue),
                    "to": .string(transition.to.rawValue), "reason": .string(transition.reason.rawValue),
                    "detail": Format.optional(transition.detail),
                ]
            }),
        ]
        context.emit(document) {
            guard !transitions.isEmpty else { return "No recorded transitions (state: \(state.rawValue)).\n" }
            var table = TextTable(header: ["DATE", "FROM", "TO", "REASON", "DETAIL"])
            for transition in transitions {
                table.append([
                    Format.date(transition.date), transition.from.rawValue, transition.to.rawValue,
                    transition.reason.rawValue, transition.detail ?? "-",
                ])
            }
            return table.rendered()
        }
        return .ok
    }

    // MARK: pending

    static func pending(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        let entries = try store.pendingRevocations()
        let document: JSONValue = [
            "count": .int(entries.count),
            "entries": .array(entries.map { entry in
                // Never the refresh token itself.
                [
                    "id": .string(entry.id), "service": .string(entry.service), "account": .string(entry.account),
                    "reason": .string(entry.reason.rawValue), "attempts": .int(entry.attempts),
                    "nextAttemptAt": .string(Format.date(entry.nextAttemptAt)),
                    "lastError": Format.optional(entry.lastError), "failureCode": Format.optional(entry.failureCode),
                    "createdAt": .string(Format.date(entry.createdAt)),
                ]
            }),
        ]
        context.emit(document) {
            guard !entries.isEmpty else { return "No pending revocations.\n" }
            var table = TextTable(header: ["ACCOUNT", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR", "FAILURE"])
            table.alignments = [.left, .right]
            for entry in entries {
                table.append([
                    entry.account, String(entry.attempts), Format.date(entry.nextAttemptAt), entry.lastError ?? "-",
                    entry.failureCode ?? "-",
                ])
            }
            return table.rendered()
        }
        return .ok
    }

    // MARK: Arguments

    static func itemKey(_ context: CommandContext) throws -> ItemKey {
        guard let account = context.command.value("account"), let kindName = context.command.value("kind") else {
            throw UsageError(kind: .missingOption(option: "--account <account>"), commandName: context.command.name)
        }
        guard let kind = ItemKind(rawValue: kindName) else {
            throw UsageError(
                kind: .invalidValue(
                    option: "--kind <kind>", environmentVariable: nil,
                    expectation: "expected one of \(CommandTable.itemKinds.joined(separator: ", "))"),
                commandName: context.command.name)
        }
        return ItemKey(service: context.command.value("service") ?? ItemKey.defaultService, account: account, kind: kind)
    }

    static func userIDArgument(_ context: CommandContext) throws -> String {
        guard let userID = context.command.positional(0) else {
            throw UsageError(kind: .missingArgument(argument: "<user-id>"), commandName: context.command.name)
        }
        return userID
    }
}
