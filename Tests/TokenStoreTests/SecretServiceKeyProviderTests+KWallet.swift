import Foundation
import Testing
import TestSupport
@testable import TokenStore

/// KWallet registers an item (label and attributes) before it decrypts the secret sent with it;
/// when that fails (a garbled Diffie-Hellman transfer session, about one in 50 with KWallet 5) it
/// answers the create with an error and keeps the item, with no secret. The next item of the same
/// label is filed in that item's place, so deleting the one without a secret deleted the new one's
/// secret too. The provider matrix failed on it: "0 key items after storing one", "an item without a
/// secret" on a key write, "does not hold a number" on an epoch read.
///
/// The garbled session cannot be made on demand, but the item it leaves can, with the real daemon:
/// a `CreateItem` that names a session KWallet does not have fails in the same place
/// (`desecret`), after the item was registered.
extension SecretServiceKeyProviderTests {
    @Test(.enabled(if: PrivateKeyring.provider == "kwallet", "plants an item KWallet keeps without a secret"))
    func kwalletKeyWriteReplacesAnItemKeptWithoutASecret() throws {
        let reference = newReference()
        defer { try? PrivateKeyring.clearItems(storeID: reference.storeID) }
        try unlockWallet()
        try plantItemWithoutSecret(
            label: reference.neutralLabel,
            attributes: ["store-id": reference.storeID, "key-id": reference.keyID, "xdg:schema": "dev.tokenstore.DataKey"])
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": reference.storeID]) == 1)

        let key = randomKey()
        try provider.storeKey(key, for: reference)
        #expect(try provider.loadKey(reference) == key)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": reference.storeID]) == 1)
    }

    @Test(.enabled(if: PrivateKeyring.provider == "kwallet", "plants an item KWallet keeps without a secret"))
    func kwalletEpochPassesOverAndClearsAnItemKeptWithoutASecret() throws {
        let storeID = randomHex()
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try unlockWallet()
        try plantItemWithoutSecret(
            label: "TokenStore store epoch",
            attributes: ["epoch-store-id": storeID, "epoch": "7", "write-id": "00", "xdg:schema": "dev.tokenstore.StoreEpoch"])
        #expect(try PrivateKeyring.itemCount(attributes: ["epoch-store-id": storeID]) == 1)

        #expect(try provider.storeEpoch(storeID: storeID) == 0)  // it holds no value
        try provider.raiseStoreEpoch(storeID: storeID, appID: "dev.tokenstore.tests", to: 3)
        #expect(try provider.storeEpoch(storeID: storeID) == 3)
        #expect(try PrivateKeyring.itemCount(attributes: ["epoch-store-id": storeID]) == 1)  // the planted one went
        try provider.raiseStoreEpoch(storeID: storeID, appID: "dev.tokenstore.tests", to: 4)
        #expect(try provider.storeEpoch(storeID: storeID) == 4)
    }

    /// KWallet shows its collection locked to Secret Service clients until one calls `Unlock`;
    /// a key write does that (without a prompt, the wallet being open).
    private func unlockWallet() throws {
        let warm = newReference()
        try provider.storeKey(randomKey(), for: warm)
        try provider.deleteKey(warm)
    }

    private func plantItemWithoutSecret(label: String, attributes: [String: String]) throws {
        let pairs = attributes.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \"\($0.value)\"" }.joined(separator: ", ")
        let properties = "{\"org.freedesktop.Secret.Item.Label\": <\"\(label)\">, "
            + "\"org.freedesktop.Secret.Item.Attributes\": <{\(pairs)}>}"
        let secret = "(objectpath \"/org/freedesktop/secrets/session/none\", @ay [], @ay [1, 2, 3], \"text/plain\")"
        let result = try PrivateKeyring.run("gdbus", [
            "call", "--session", "--dest", "org.freedesktop.secrets",
            "--object-path", "/org/freedesktop/secrets/aliases/default",
            "--method", "org.freedesktop.Secret.Collection.CreateItem", properties, secret, "false",
        ])
        // The create fails ("Can't find session"), as with a garbled session; the item stays.
        #expect(result.status != 0 && result.standardError.contains("session"), "\(result.standardError)")
    }
}
