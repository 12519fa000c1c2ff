import Foundation
import TokenStore

/// `unlock`, `rotate-key`, `reset`, `destroy`: managing the data key.
enum KeyCommands {
    /// How long `unlock` waits for the user at the desktop's prompt.
    static let unlockTimeout: Duration = .seconds(120)

    // MARK: unlock

    static func unlock(_ context: CommandContext) throws -> ExitCode {
        let provider = SecretServiceKeyProvider()
        context.note("asking the Secret Service to unlock the keyring (the desktop may show a prompt)")
        try provider.unlockDefaultCollection(timeout: unlockTimeout)
        context.emit(["unlocked": true]) { "The keyring is unlocked.\n" }
        return .ok
    }

    // MARK: rotate-key

    static func rotateKey(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore()
        let progress = ProgressReporter(label: "rotate-key", console: context.console, quiet: context.global.quiet)
        let report = try store.rotateDataKey { done, total in progress.update(done: done, total: total) }
        progress.finish()
        let document: JSONValue = [
            "previousKeyID": .string(report.previousKeyIdentifier), "newKeyID": .string(report.newKeyIdentifier),
            "rowsResealed": .int(report.rowsResealed), "batches": .int(report.batches), "resumed": .bool(report.resumed),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["previous key id", report.previousKeyIdentifier])
            table.append(["new key id", report.newKeyIdentifier])
            table.append(["rows re-sealed", String(report.rowsResealed)])
            table.append(["batches", String(report.batches)])
            if report.resumed { table.append(["resumed", "an interrupted rotation was finished"]) }
            return table.rendered()
        }
        return .ok
    }

    // MARK: reset, destroy

    static func reset(_ context: CommandContext) throws -> ExitCode {
        try requireConfirmation(context)
        let location = try context.requireExistingStore()
        let report = try TokenStore.resetStore(
            path: location.path, appID: location.appID, keyProvider: context.keyProvider(storePath: location.path),
            confirm: .yesDiscardSealedData)
        let document: JSONValue = [
            "itemsDestroyed": .int(report.itemsDestroyed),
            "credentialStatesRevoked": .int(report.credentialStatesRevoked),
            "pendingRevocationsLost": .int(report.pendingRevocationsLost),
            "discardedKeyIDs": Format.strings(report.discardedKeyIdentifiers),
            "newKeyID": .string(report.newKeyIdentifier),
        ]
        context.emit(document) {
            var table = TextTable(header: nil)
            table.append(["items destroyed", String(report.itemsDestroyed)])
            table.append(["users recorded revoked (keyLost)", String(report.credentialStatesRevoked)])
            table.append(["pending revocations lost", String(report.pendingRevocationsLost)])
            table.append(["new key id", report.newKeyIdentifier])
            return table.rendered()
        }
        return .ok
    }

    static func destroy(_ context: CommandContext) throws -> ExitCode {
        try requireConfirmation(context)
        let location = try context.requireExistingStore()
        try TokenStore.destroyStore(
            path: location.path, appID: location.appID, keyProvider: context.keyProvider(storePath: location.path),
            confirm: .yesDestroyEverything)
        context.emit(["destroyed": true, "path": .string(location.path)]) { "Destroyed the store and its data keys.\n" }
        return .ok
    }

    /// `--yes` is required by the parser already; checked again because these commands destroy data.
    private static func requireConfirmation(_ context: CommandContext) throws {
        guard context.command.hasFlag("yes") else {
            throw UsageError(kind: .missingOption(option: "--yes"), commandName: context.command.name)
        }
    }
}
