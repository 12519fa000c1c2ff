internal import CGIO
internal import CLibSecret
internal import CSodium
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Asks the XDG desktop portal for this app's secret (`org.freedesktop.portal.Secret`,
/// `RetrieveSecret`), the way libsecret does inside a Flatpak: a pipe's write end goes with
/// the call, the portal's backend (gnome-keyring, KWallet) writes the app's secret into it,
/// and the `Response` signal of the returned `org.freedesktop.portal.Request` tells whether
/// it did. The portal knows the app by its sandbox (`/.flatpak-info`), so each app id gets
/// a secret of its own; a caller outside any sandbox gets the one all host apps share.
///
/// The secret itself is never kept: it is read into memory that is wiped at once, after
/// BLAKE2b has condensed it into the 32-byte master key ``PortalKeyProvider`` derives its
/// key-wrapping keys from.
enum PortalSecret {
    static let busName = "org.freedesktop.portal.Desktop"
    static let objectPath = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.portal.Secret"
    static let requestInterface = "org.freedesktop.portal.Request"
    /// The longest secret accepted from the portal (gnome-keyring sends 64 bytes).
    static let maximumLength = 1_024
    /// The BLAKE2b key that makes the master key specific to TokenStore.
    static let masterKeyDomain = Array("tokenstore/portal-master/v1".utf8)

    static let hint =
        "The Secret portal (org.freedesktop.portal.Secret of xdg-desktop-portal) must run in the session "
        + "with a Secret backend (gnome-keyring's portal backend, or KWallet's); outside a sandbox, "
        + "use the Secret Service or a PassphraseKeyProvider instead."

    /// Retrieves the app's secret and returns the master key made from it.
    /// - Throws: ``TokenStoreError`` `secretServiceUnavailable` (no portal or backend, or the
    ///   portal refused: its hint names the portal), `timedOut`, `cancelled`, `ioError`.
    static func masterKey(timeout: Duration) throws(TokenStoreError) -> SecretBytes {
        try GLibWorkerThread.run("portal secret", timeout: timeout) { cancellable throws(TokenStoreError) in
            try retrieve(cancellable, timeoutMilliseconds: Int32(clamping: (timeout + .seconds(1)).wholeMilliseconds))
        }
    }

    // MARK: - On the worker thread

    /// What the `Response` signal said; touched only on the worker thread.
    private final class Reply {
        var response: UInt32?
        var malformed = false
    }

    private static func retrieve(_ cancellable: GLibCancellable, timeoutMilliseconds: Int32) throws(TokenStoreError) -> SecretBytes {
        let operation = "portal secret"
        // Signals are dispatched in the thread-default context of the subscription: ours.
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        var error: UnsafeMutablePointer<GError>?
        guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable.pointer, &error) else {
            throw failure(error, operation)
        }
        defer { g_object_unref(UnsafeMutableRawPointer(bus)) }

        // The request path the portal will use (handle_token), subscribed before the call.
        let token = "tokenstore_" + Hex.encode(SecretBytes.random(count: 8).copyBytes())
        let sender = String(cString: g_dbus_connection_get_unique_name(bus)).dropFirst()
            .map { $0 == "." ? "_" : $0 }
        let expected = "/org/freedesktop/portal/desktop/request/\(String(sender))/\(token)"
        let reply = Reply()
        let retained = Unmanaged.passRetained(reply)
        var subscriptions = [subscribe(bus, path: expected, retained)]
        defer {
            for id in subscriptions { g_dbus_connection_signal_unsubscribe(bus, id) }
            // The subscriptions' release callbacks run in this context: let them.
            while g_main_context_iteration(context, 0) != 0 {}
            retained.release()
        }

        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw KeyFiles.posix("making a pipe for the portal secret", errno) }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        let readEnd = fds[0]
        defer { close(readEnd) }
        // The list owns the write end from here and closes it when it is freed.
        let fdList = g_unix_fd_list_new_from_array(&fds[1], 1)

        var options = [g_variant_new_dict_entry(
            g_variant_new_string("handle_token"), g_variant_new_variant(g_variant_new_string(token)))]
        let optionsValue = options.withUnsafeMutableBufferPointer { g_variant_new_array(nil, $0.baseAddress, 1) }
        var arguments = [g_variant_new_handle(0), optionsValue]
        let parameters = arguments.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, 2) }
        let result = g_dbus_connection_call_with_unix_fd_list_sync(
            bus, busName, objectPath, interface, "RetrieveSecret", parameters, nil, G_DBUS_CALL_FLAGS_NONE,
            timeoutMilliseconds, fdList, nil, cancellable.pointer, &error)
        g_object_unref(fdList)
        guard let result else { throw failure(error, operation) }
        let handle = objectPathOfReply(result)
        g_variant_unref(result)
        guard let handle else {
            throw TokenStoreError(.ioError, "The Secret portal answered RetrieveSecret with no request handle.", hint: hint)
        }
        if handle != expected { subscriptions.append(subscribe(bus, path: handle, retained)) }  // an old portal

        // Wait for Response; a ticking source wakes the loop to notice a cancellation.
        let tick = g_timeout_source_new(50)
        g_source_set_callback(tick, { _ in 1 }, nil, nil)
        g_source_attach(tick, context)
        defer {
            g_source_destroy(tick)
            g_source_unref(tick)
        }
        while reply.response == nil, !reply.malformed, !cancellable.isCancelled {
            g_main_context_iteration(context, 1)
        }
        if cancellable.isCancelled {
            closeRequest(bus, handle)
            throw TokenStoreError(.cancelled, "The Secret portal call was cancelled (\(operation)).", hint: hint)
        }
        guard let response = reply.response else {
            throw TokenStoreError(.ioError, "The Secret portal sent a malformed Response signal.", hint: hint)
        }
        guard response == 0 else {
            // 1: the user cancelled the interaction; 2: the backend failed or refused.
            throw TokenStoreError(
                .secretServiceUnavailable,
                "The Secret portal refused to hand out this app's secret (response \(response)).", hint: hint)
        }
        return try readSecret(readEnd, cancellable)
    }

    private static func subscribe(
        _ bus: OpaquePointer, path: String, _ reply: Unmanaged<Reply>
    ) -> UInt32 {
        _ = reply.retain()  // released by the subscription's destroy callback
        return g_dbus_connection_signal_subscribe(
            bus, busName, requestInterface, "Response", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, userData in
                let reply = Unmanaged<Reply>.fromOpaque(userData!).takeUnretainedValue()
                guard let parameters, String(cString: g_variant_get_type_string(parameters)) == "(ua{sv})" else {
                    reply.malformed = true
                    return
                }
                let code = g_variant_get_child_value(parameters, 0)
                reply.response = g_variant_get_uint32(code)
                g_variant_unref(code)
            },
            reply.toOpaque(),
            { userData in Unmanaged<Reply>.fromOpaque(userData!).release() })
    }

    private static func objectPathOfReply(_ result: OpaquePointer) -> String? {
        guard String(cString: g_variant_get_type_string(result)) == "(o)" else { return nil }
        let child = g_variant_get_child_value(result, 0)
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    /// Asks the portal to drop a request we stopped waiting for (no answer awaited).
    private static func closeRequest(_ bus: OpaquePointer, _ handle: String) {
        g_dbus_connection_call(
            bus, busName, handle, requestInterface, "Close", nil, nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, 1_000,
            nil, nil, nil)
    }

    /// Reads the secret to the end of the pipe (the backend closes it after writing) into
    /// memory that is wiped before it is freed, and returns its BLAKE2b master key.
    private static func readSecret(_ fd: Int32, _ cancellable: GLibCancellable) throws(TokenStoreError) -> SecretBytes {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumLength + 1, alignment: 16)
        defer {
            sodium_memzero(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
        var count = 0
        var waited = 0
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 50)
            if ready < 0 {
                if errno == EINTR { continue }
                throw KeyFiles.posix("waiting for the portal secret", errno)
            }
            if cancellable.isCancelled {
                throw TokenStoreError(.cancelled, "The Secret portal call was cancelled (portal secret).", hint: hint)
            }
            if ready == 0 {
                // Some backends keep a copy of the pipe open: after a quiet quarter-second,
                // what was written is the secret.
                waited += 1
                if count > 0, waited >= 5 { break }
                continue
            }
            waited = 0
            let n = Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count)
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw KeyFiles.posix("reading the portal secret", errno)
            }
            if n == 0 { break }
            count += n
            guard count <= maximumLength else {
                throw TokenStoreError(.ioError, "The Secret portal sent a secret longer than \(maximumLength) bytes.", hint: hint)
            }
        }
        guard count > 0 else {
            throw TokenStoreError(.secretServiceUnavailable, "The Secret portal sent an empty secret.", hint: hint)
        }
        Sodium.ensureInitialized()
        return SecretBytes(count: 32) { out in
            _ = crypto_generichash(
                out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32,
                buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(count),
                masterKeyDomain, masterKeyDomain.count)
        }
    }

    /// A failed GDBus call as the provider reports it: the portal named in the hint.
    private static func failure(_ error: UnsafeMutablePointer<GError>?, _ operation: String) -> TokenStoreError {
        guard let error else { return TokenStoreError(.ioError, "The Secret portal call failed (\(operation)).", hint: hint) }
        let classified = GLibError.classify(error, operation: operation)
        switch classified.code {
        case .timedOut, .cancelled:
            return TokenStoreError(classified.code, "The Secret portal did not answer in time (\(operation)).", hint: hint, cause: classified.cause)
        case .secretServiceUnavailable:
            return TokenStoreError(
                .secretServiceUnavailable, "No Secret portal answered on the session bus (\(operation)).", hint: hint,
                cause: classified.cause)
        default:
            return TokenStoreError(.secretServiceUnavailable, "The Secret portal call failed (\(operation)).", hint: hint, cause: classified.cause)
        }
    }
}
