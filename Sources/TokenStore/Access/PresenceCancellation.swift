/// What ends a user-presence check that waits on polkit (``PolkitAuthority``) when the `async`
/// call it serves is cancelled: polkit is told (`CancelCheckAuthorization`, which closes its
/// agent's dialog), the read throws `cancelled`, and nothing is read.
///
/// The async forms of the store's calls (``TokenStore/onBlockingExecutor(presence:_:)``) bind
/// one to the thread that runs their body and cancel it when the calling task is cancelled; the
/// renewal binds its own to its read of the refresh token, which its caller's cancellation ends
/// (a request already sent runs to its end). The ledger's async transactions do not: a
/// transaction that has started runs to its end. A call outside them has none and waits for
/// polkit's answer or its time-out.
package final class PresenceCancellation: Sendable {
    /// The cancellation of the store call running on this thread, if it has one.
    @TaskLocal static var current: PresenceCancellation?

    let cancellable = GLibCancellable()

    package init() {}

    /// Ends a check waiting on polkit now, and any this cancellation's call would start.
    package func cancel() { cancellable.cancel() }

    var isCancelled: Bool { cancellable.isCancelled }

    /// Runs `body` (a synchronous store call) with this cancellation as the thread's ``current``.
    package func bind<R>(_ body: () throws -> R) rethrows -> R {
        try Self.$current.withValue(self, operation: body)
    }

    /// Runs `body` on ``BlockingExecutor/shared`` under `presence` (one of its own when nil), and
    /// cancels it when the calling task is cancelled.
    package static func onBlockingExecutor<R: Sendable>(
        _ presence: PresenceCancellation? = nil, _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        let presence = presence ?? PresenceCancellation()
        return try await withTaskCancellationHandler {
            try await BlockingExecutor.shared.run { () throws(any Error) -> R in try presence.bind(body) }
        } onCancel: {
            presence.cancel()
        }
    }
}
