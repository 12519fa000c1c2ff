import TokenStore

/// `tokenctl slot list|add KIND|remove ID`: the store's key slots, the ways to its data key.
struct SlotCommand: TokenctlCommand {
    static let action = PositionalSpec("action", "list, add or remove.")
    static let target = PositionalSpec(
        "kind-or-id", required: false, "For add: \(SlotKinds.names.joined(separator: ", ")); for remove: the slot's id.")
    static let newPassphraseFD = OptionSpec.value(
        "new-passphrase-fd", "fd", rule: .nonNegativeInteger,
        "For add passphrase: read the new slot's passphrase from this open file descriptor.")
    static let force = OptionSpec.flag(
        "force", "For add recovery: print the recovery key even when stdout is not a terminal (a pipe or a file keeps it).")

    static let spec = CommandSpec(
        "slot",
        abstract: "List, add or remove the store's key slots (the ways to its data key).",
        discussion: """
            A slot is one way to the data key: the keyring, the TPM, the TPM with a PIN (tpm-pin, the PIN \
            on --pin-fd N; 'add tpm --pin-fd N' too), the Secret portal, a passphrase (--new-passphrase-fd N) \
            or a recovery key. Adding or removing one opens the store with a slot \
            it already has; the last slot cannot be removed. 'slot add recovery' prints the recovery key \
            once, only to a terminal unless --force: write it down; open with it by --recovery-key-fd N.
            """,
        options: [newPassphraseFD, force], positionals: [action, target])

    let action: String
    let target: String?
    let newPassphraseFD: Int32?
    let force: Bool

    init(parsed: ParsedCommand) throws {
        action = parsed.argument(Self.action) ?? ""
        target = parsed.argument(Self.target)
        newPassphraseFD = parsed.value(Self.newPassphraseFD).flatMap { Int32($0) }
        force = parsed.isSet(Self.force)
        guard ["list", "add", "remove"].contains(action) else {
            throw CommandFailure(.usage, "unknown slot action", hint: "give list, add KIND or remove ID")
        }
        if action != "list", target == nil {
            throw CommandFailure(.usage, "slot \(action) needs \(action == "add" ? "a kind" : "a slot id")")
        }
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        switch action {
        // `slot add tpm --pin-fd N` makes the TPM + PIN slot, as `slot add tpm-pin --pin-fd N`.
        case "add" where target == "tpm" && context.global.pinFileDescriptor != nil: return try addTPMPIN(context)
        case "add": return try add(context)
        case "remove": return try remove(context)
        default: return try list(context)
        }
    }

    private func list(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        let slots = try store.keySlots
        context.emit(["slots": SlotKinds.document(slots)]) { SlotKinds.table(slots) }
        return .ok
    }

    private func add(_ context: CommandContext) throws -> ExitCode {
        let kind = try SlotKinds.kind(named: target ?? "")
        if kind == .recovery, !force, !Terminal.standardOutputIsTerminal {
            throw CommandFailure(
                .usage, "the recovery key is printed only to a terminal, and stdout is not one; nothing was added",
                hint: "run it in a terminal, or give --force to print it to the pipe or file")
        }
        if kind == .tpmPIN { return try addTPMPIN(context) }
        let store = try context.openStore()
        if kind == .recovery {
            let (slot, recoveryKey) = try store.addRecoveryKeySlot(limits: WrappingCost.limits)
            let text = recoveryKey.text.stringValue() ?? ""
            context.emit(["slot": SlotKinds.document(slot), "recoveryKey": .string(text)]) {
                "added key slot \(slot.id) (recovery). The recovery key, shown this once (write it down; it is stored nowhere):\n\n"
                    + "    \(text)\n\nOpen the store with it: tokenctl --recovery-key-fd N …\n"
            }
            return .ok
        }
        let provider = try SlotKinds.provider(kind, storePath: store.path, newPassphraseFD: newPassphraseFD)
        let slot = try store.addKeySlot(provider)
        context.emit(["slot": SlotKinds.document(slot)]) { "added key slot \(slot.id) (\(SlotKinds.name(slot.kind)))\n" }
        return .ok
    }

    /// `slot add tpm-pin --pin-fd N` (or `slot add tpm --pin-fd N`): the PIN read from --pin-fd
    /// is the new slot's; the store opens with another slot.
    private func addTPMPIN(_ context: CommandContext) throws -> ExitCode {
        guard let fd = context.global.pinFileDescriptor else {
            throw CommandFailure(.usage, "a TPM PIN slot needs its PIN: give --pin-fd N (the PIN on descriptor N)")
        }
        let pin = try SecretInput.pin(fileDescriptor: fd)
        var opening = context
        opening.leavesPINToCommand = true
        let store = try opening.openStore()
        let slot = try store.addKeySlot(TPMPINKeyProvider(pin: pin))
        context.emit(["slot": SlotKinds.document(slot)]) {
            "added key slot \(slot.id) (tpm-pin). Open the store with it: tokenctl --pin-fd N … (the TPM limits wrong PINs)\n"
        }
        return .ok
    }

    private func remove(_ context: CommandContext) throws -> ExitCode {
        guard let id = Int(target ?? ""), id > 0 else {
            throw CommandFailure(.usage, "the slot id must be a positive number", hint: "'tokenctl slot list' shows them")
        }
        let store = try context.openStore()
        try store.removeKeySlot(id)
        let slots = try store.keySlots
        context.emit(["removed": .int(id), "slots": SlotKinds.document(slots)]) { "removed key slot \(id)\n" + SlotKinds.table(slots) }
        return .ok
    }
}

/// The slot kinds as tokenctl names them, and their documents.
enum SlotKinds {
    /// The names `slot add` and `migrate-provider --to` accept.
    static let names = ["keyring", "tpm", "tpm-pin", "portal", "passphrase", "recovery"]

    static func kind(named name: String) throws -> KeyProviderKind {
        switch name {
        case "keyring", "secret-service": return .secretService
        case "tpm": return .tpm
        case "tpm-pin": return .tpmPIN
        case "portal": return .portal
        case "passphrase": return .passphrase
        case "recovery": return .recovery
        default:
            throw CommandFailure(.usage, "unknown slot kind", hint: "give one of \(names.joined(separator: ", "))")
        }
    }

    /// The command-line name of a kind (`keyring` for the Secret Service).
    static func name(_ kind: KeyProviderKind) -> String { kind == .secretService ? "keyring" : kind.rawValue }

    /// The provider that keeps a new slot of `kind` (not `recovery`).
    static func provider(_ kind: KeyProviderKind, storePath: String, newPassphraseFD: Int32?) throws -> any KeyProvider {
        if kind == .passphrase {
            guard let fd = newPassphraseFD else {
                throw CommandFailure(.usage, "a passphrase slot needs its passphrase: give --new-passphrase-fd N")
            }
            return PassphraseKeyProvider(
                storePath: storePath, passphrase: try SecretInput.passphrase(fileDescriptor: fd), limits: WrappingCost.limits)
        }
        guard let make = kind.traits?.make else { throw CommandFailure(.usage, "no provider for '\(kind.rawValue)'") }
        return make(storePath)
    }

    static func document(_ slot: KeySlot) -> JSONValue {
        ["id": .int(slot.id), "kind": .string(name(slot.kind)), "createdAt": .string(Format.date(slot.createdAt))]
    }

    static func document(_ slots: [KeySlot]) -> JSONValue { .array(slots.map(document)) }

    static func table(_ slots: [KeySlot]) -> String {
        var table = TextTable(header: ["ID", "KIND", "CREATED"])
        for slot in slots { table.append([String(slot.id), name(slot.kind), Format.date(slot.createdAt)]) }
        return table.rendered()
    }
}
