import FoundationEssentials

/// Thrown inside a read's body when the policy in force needs a proof of the user's presence
/// that this process does not hold: the read is abandoned (nothing was returned), polkit is
/// asked outside the store's lock and transaction, and the read runs again.
struct PresenceNeeded: Error {}

extension StoreConnection {
    /// Whether a ``AccessPolicy/userPresence(_:)`` policy gates reading items of `kind`: the
    /// refresh token and generic items always; other kinds when the app asks
    /// (``TokenStore/Options/userPresenceAlsoFor``).
    func presenceCovers(_ kind: ItemKind) -> Bool {
        kind == .refreshToken || kind == .generic || options.userPresenceAlsoFor.contains(kind)
    }

    /// Inside a read's body, with `lock` held and the policy in force up to date: returns when
    /// the secret of an item of `kind` may be handed out, else throws ``PresenceNeeded``.
    func requirePresence(for kind: ItemKind, envelope: Envelope) throws {
        guard case .userPresence(let window) = accessPolicy, presenceCovers(kind) else { return }
        let now = PresenceProofs.now()
        switch window {
        case .always:
            if presenceTicket.exchange(false, ordering: .acquiringAndReleasing) { return }
        case .appLifecycle(let seconds):
            if let at = PresenceProofs.inProcessProof(storeID: storeID), PresenceProofs.holds(at, seconds: seconds, now: now) { return }
        case .session(let seconds):
            if let at = PresenceProofs.inProcessProof(storeID: storeID), PresenceProofs.holds(at, seconds: seconds, now: now) {
                // Made here: shared with the session's other processes (kept when already there).
                if PresenceProofs.sessionProof(envelope) != at { PresenceProofs.recordForSession(envelope, at: at) }
                return
            }
            if let at = PresenceProofs.sessionProof(envelope), PresenceProofs.holds(at, seconds: seconds, now: now) { return }
        }
        throw PresenceNeeded()
    }

    /// A look-up that may need the user's presence: the checked read path (its body runs once,
    /// so an `.always` authorization is spent on one read) when the policy in hand is
    /// userPresence and gates `kind`, else the repeatable one (whose body, when the policy
    /// changed in another process meanwhile, runs again on the checked path, under the new one).
    func gatedRead<T>(_ kind: ItemKind, _ body: (Database, Envelope) throws -> T) throws -> T {
        try withPresence {
            if underPresencePolicy.load(ordering: .acquiring), presenceCovers(kind) { return try read(body) }
            return try readRepeatable(body)
        }
    }

    /// Runs `read` (a read whose body calls ``requirePresence(for:envelope:)``); when it needs
    /// the user's presence, asks polkit (outside the lock and the transaction) and runs it again.
    /// - Throws: `userPresenceDenied` (denied or dismissed: nothing was read), `timedOut`,
    ///   `lockSourceUnavailable` (no polkit on the system bus); what `read` throws.
    func withPresence<T>(_ read: () throws -> T) throws -> T {
        var asked = 0
        while true {
            do {
                return try read()
            } catch is PresenceNeeded {
                // Another thread may take this object's `.always` authorization first; asking
                // again is right then (each read one proof), but not for ever.
                guard asked < 3 else {
                    throw TokenStoreError(.userPresenceDenied, "The user's presence was asked three times for one read and never held; nothing was read.")
                }
                asked += 1
                try askPresence()
            }
        }
    }

    /// One polkit check with user interaction; on success a proof (this process's, and a
    /// ticket for one `.always` read).
    private func askPresence() throws {
        let action = PolkitAuthority.actionID(appID: appID)
        let answer = try PolkitAuthority.check(actionID: action, address: options.polkitBusAddress, timeout: options.userPresenceTimeout)
        guard answer == .authorized else {
            logger.info("user presence denied", metadata: ["challenge": answer == .denied(challenge: true) ? "true" : "false"])
            throw TokenStoreError(
                .userPresenceDenied,
                answer == .denied(challenge: true)
                    ? "The user's presence was not confirmed (polkit's authentication was dismissed, failed, or no authentication agent could ask). Nothing was read or changed."
                    : "polkit refused the user-presence check for this app's action. Nothing was read or changed.",
                hint: "Retry after the user acts; check that the app's polkit action (\(action)) is installed.")
        }
        logger.info("user presence confirmed")
        PresenceProofs.record(storeID: storeID, at: PresenceProofs.now())
        presenceTicket.store(true, ordering: .releasing)
    }
}
