import TokenStore

/// `tokenctl migrate-provider --to KIND`: moves the store's data key to another key provider
/// without re-sealing anything and without a moment with no way in: add a slot of the new kind,
/// verify that it opens the store, remove the old slots. Each step is a commit of its own, so a
/// run killed at any point leaves a store that opens with the old or the new slot; running it
/// again finishes it (a slot of the new kind already there is verified, not added twice).
struct MigrateProviderCommand: TokenctlCommand {
    static let to = OptionSpec.value(
        "to", "kind", required: true, rule: .oneOf(SlotKinds.names.filter { $0 != "recovery" && $0 != "tpm-pin" }),
        "The key provider to move to: keyring, tpm, portal or passphrase (with --new-passphrase-fd N).")

    static let spec = CommandSpec(
        "migrate-provider",
        abstract: "Move the data key to another key provider: add its slot, verify it opens, remove the old slot.",
        discussion: """
            Nothing is re-sealed and every row stays readable. Resumable: a run interrupted at any \
            step leaves a store that opens with the old or the new slot, and running it again \
            finishes it. Recovery and TPM PIN slots are kept. The recorded key provider follows the new slot.
            """,
        options: [to, SlotCommand.newPassphraseFD])

    let target: String
    let newPassphraseFD: Int32?

    init(parsed: ParsedCommand) throws {
        target = try parsed.requiredValue(Self.to)
        newPassphraseFD = parsed.value(SlotCommand.newPassphraseFD).flatMap { Int32($0) }
    }

    func run(_ context: CommandContext) throws -> ExitCode {
        let kind = try SlotKinds.kind(named: target)
        let store = try context.openStore()
        let newProvider = try SlotKinds.provider(kind, storePath: store.path, newPassphraseFD: newPassphraseFD)
        var added: KeySlot?
        var slots = try store.keySlots
        if !slots.contains(where: { $0.kind == kind }) {
            added = try store.addKeySlot(newProvider)
            slots = try store.keySlots
        }
        CrashPoint.reach("migrateProvider.afterAdd")
        // Verify: the new slot alone opens the store to the same key.
        let check = try TokenStore(path: store.path, appID: store.appID, keyProvider: newProvider, options: .init(readOnly: true))
        let opened = check.keyIdentifier == store.keyIdentifier
        check.close()
        guard opened else {
            throw CommandFailure(.dataError, "the new key slot does not open the store to the same key; the old slots were kept")
        }
        CrashPoint.reach("migrateProvider.afterVerify")
        var removed: [Int] = []
        for slot in slots where slot.kind != kind && slot.kind != .recovery && slot.kind != .tpmPIN {
            try store.removeKeySlot(slot.id)
            removed.append(slot.id)
        }
        let left = try store.keySlots
        context.emit([
            "to": .string(SlotKinds.name(kind)), "added": added.map { .int($0.id) } ?? .null,
            "removed": .array(removed.map { .int($0) }), "slots": SlotKinds.document(left),
        ]) {
            (added.map { "added key slot \($0.id) (\(SlotKinds.name(kind)))\n" } ?? "a \(SlotKinds.name(kind)) slot was there already\n")
                + "verified: it opens the store\n" + removed.map { "removed key slot \($0)\n" }.joined() + SlotKinds.table(left)
        }
        return .ok
    }
}
