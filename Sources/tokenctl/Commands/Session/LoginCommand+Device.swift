import AuthSession
import FoundationEssentials
import TokenStore

#if canImport(Glibc)
import Glibc
#endif

extension LoginCommand {
    /// `session.signInWithDevice`: the user code and the verification URL on stderr (and a QR
    /// code of the URL when `qrencode` is on PATH), then the wait for the approval.
    func signInOnDevice(_ context: CommandContext, _ session: TokenSession, audience: String?) async throws -> SignInResult {
        let (account, scopes, console, allowsUserChange) = (AccountID(account), scopes, context.console, allowsUserChange)
        // The code must reach the user whatever the output mode; the QR code and the notes are
        // left out with --json and --quiet.
        let decorated = !context.json && !context.global.quiet
        let environment = ProcessInfo.processInfo.environment
        do {
            return try await session.signInWithDevice(
                account: account, scopes: scopes, audience: audience, allowsUserChange: allowsUserChange,
                onUserCode: { code in
                    console.writeError(Self.deviceInstructions(code, now: Date()))
                    if decorated, let complete = code.verificationURIComplete,
                        let qr = QRCode.render(complete.absoluteString, environment: environment)
                    {
                        console.writeError(qr)
                    }
                    if decorated { console.writeError("tokenctl: waiting for the approval\n") }
                })
        } catch let error as AuthSessionError {
            throw ErrorMapping.deviceSignInFailure(error)
        }
    }

    /// The lines that tell the user what to do; the user code is not a secret (it is worthless
    /// without the device code, which stays in this process).
    static func deviceInstructions(_ code: DeviceAuthorization, now: Date) -> String {
        var text = "tokenctl: to sign in, open \(code.verificationURI.absoluteString) on any device and enter the code \(code.userCode)\n"
        if let complete = code.verificationURIComplete {
            text += "tokenctl: or open \(complete.absoluteString)\n"
        }
        let seconds = max(0, Int(code.expiresAt.timeIntervalSince(now).rounded()))
        text += "tokenctl: the code expires in \(seconds) s (it is not a secret; it works only with this tokenctl)\n"
        return text
    }
}

/// A QR code of a URL for the terminal, drawn by `qrencode -t UTF8` when it is on PATH. The URL
/// goes to qrencode on its stdin, not on its command line; what it draws goes to tokenctl's
/// stderr as a string. Best effort: `nil` when qrencode is missing or fails.
enum QRCode {
    static func render(_ text: String, environment: [String: String]) -> String? {
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        let candidates: [String] = path.split(separator: ":").map { String($0) + "/qrencode" }
        guard let program = candidates.first(where: { access($0, X_OK) == 0 }) else { return nil }
        guard let output = Subprocess.run([program, "-t", "UTF8", "-o", "-"], input: Array(text.utf8), timeout: .seconds(5)),
            !output.isEmpty
        else { return nil }
        return String(decoding: output, as: UTF8.self)
    }
}
