import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// The secrets tokenctl reads from a file descriptor rather than from an argument: the
/// secret `put` stores and the Apple code `login` exchanges (stdin), and the store
/// passphrase (`--passphrase-fd N`), and the login hint (`login --login-hint-fd N`). Each is read
/// to the end, loses one trailing newline (`\n` or `\r\n`), and the read buffer is wiped.
enum SecretInput {
    /// The hint for an empty secret on `put`'s stdin.
    static let putHint = "pipe the secret in: printf '%s' \"$SECRET\" | tokenctl put --account A --kind K"

    /// The whole of stdin minus one trailing newline.
    /// - Parameters:
    ///   - what: the secret's name in the errors, e.g. `the Apple authorization code`.
    ///   - emptyHint: the hint shown when stdin is empty.
    /// - Throws: `CommandFailure` (65) for an empty or oversize secret, (1) when stdin cannot be read.
    static func standardInput(_ what: String = "the secret", emptyHint: String = putHint) throws -> SecretBytes {
        let maximum = StoreLimits.maxSecretBytes
        return try readToEnd(STDIN_FILENO, capacity: maximum + 3) { code in
            CommandFailure(
                .failure, "reading \(what) from stdin failed: \(errorText(code))",
                hint: "give the secret on stdin, e.g. printf '%s' \"$SECRET\" | tokenctl put …")
        } body: { bytes in
            if bytes.count > maximum + 1 || (bytes.count == maximum + 1 && bytes.last != newline) {
                throw CommandFailure(.dataError, "\(what) read from stdin is larger than \(maximum) bytes")
            }
            let secret = withoutTrailingNewline(bytes)
            guard !secret.isEmpty else {
                throw CommandFailure(.dataError, "\(what) read from stdin is empty", hint: emptyHint)
            }
            return SecretBytes(secret)
        }
    }

    /// The system's text for an errno value ("Bad file descriptor"), as `strerror` gives it.
    static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// The passphrase read from the open file descriptor `fd` to its end, minus one trailing newline.
    /// - Throws: `CommandFailure` (64) for a descriptor that cannot be read or an empty or oversize passphrase.
    static func passphrase(fileDescriptor fd: Int32) throws -> SecretBytes {
        let limit = 64 * 1024
        return try readToEnd(fd, capacity: limit + 1) { code in
            CommandFailure(
                .usage, "cannot read the passphrase from file descriptor \(fd): \(errorText(code))",
                hint: "open it for the command, e.g. 'tokenctl --passphrase-fd 3 status 3<passphrase-file'")
        } body: { bytes in
            guard bytes.count <= limit else { throw CommandFailure(.usage, "the passphrase is longer than \(limit) bytes") }
            let passphrase = withoutTrailingNewline(bytes)
            guard !passphrase.isEmpty else {
                throw CommandFailure(.usage, "the passphrase read from file descriptor \(fd) is empty")
            }
            return SecretBytes(passphrase)
        }
    }

    /// The TPM PIN (`--pin-fd N`) read from `fd` to its end, minus one trailing newline: 4 to 64 bytes.
    /// - Throws: `CommandFailure` (64) for a descriptor that cannot be read or a PIN of another length.
    static func pin(fileDescriptor fd: Int32) throws -> SecretBytes {
        let range = TPMPINKeyProvider.pinLengths
        return try readToEnd(fd, capacity: 1024) { code in
            CommandFailure(
                .usage, "cannot read the PIN from file descriptor \(fd): \(errorText(code))",
                hint: "open it for the command, e.g. 'tokenctl --pin-fd 3 status 3<pin-file'")
        } body: { bytes in
            let pin = withoutTrailingNewline(bytes)
            guard range.contains(pin.count) else {
                throw CommandFailure(
                    .usage, "the PIN read from file descriptor \(fd) must be \(range.lowerBound) to \(range.upperBound) bytes")
            }
            return SecretBytes(pin)
        }
    }

    /// The login hint (`login --login-hint-fd N`) read from `fd` to its end, minus one trailing
    /// newline. An identifier, not a secret, but kept out of the process list; never echoed.
    /// - Throws: `CommandFailure` (64) for a descriptor that cannot be read, an empty or oversize
    ///   hint, or one that is not UTF-8.
    static func loginHint(fileDescriptor fd: Int32) throws -> String {
        let limit = 4096
        return try readToEnd(fd, capacity: limit + 1) { code in
            CommandFailure(
                .usage, "cannot read the login hint from file descriptor \(fd): \(errorText(code))",
                hint: "open it for the command, e.g. printf '%s' \"$EMAIL\" | tokenctl login --browser --login-hint-fd 0 …")
        } body: { bytes in
            guard bytes.count <= limit else { throw CommandFailure(.usage, "the login hint is longer than \(limit) bytes") }
            let hint = withoutTrailingNewline(bytes)
            guard !hint.isEmpty else { throw CommandFailure(.usage, "the login hint read from file descriptor \(fd) is empty") }
            guard let text = String(validating: hint, as: UTF8.self) else {
                throw CommandFailure(.usage, "the login hint read from file descriptor \(fd) is not UTF-8")
            }
            return text
        }
    }

    private static let newline: UInt8 = 0x0A
    private static let carriageReturn: UInt8 = 0x0D

    /// ``POSIXFile/readToEnd(_:capacity:_:)`` with a read failure turned into `readFailure(errno)`.
    private static func readToEnd<T>(
        _ fd: Int32, capacity: Int, readFailure: (Int32) -> CommandFailure,
        body: (Slice<UnsafeBufferPointer<UInt8>>) throws -> T
    ) throws -> T {
        do {
            return try POSIXFile.readToEnd(fd, capacity: capacity, body)
        } catch let failure as POSIXFile.Failure {
            throw readFailure(failure.errno)
        }
    }

    /// `bytes` without one final `\n` or `\r\n`.
    private static func withoutTrailingNewline(
        _ bytes: Slice<UnsafeBufferPointer<UInt8>>
    ) -> Slice<UnsafeBufferPointer<UInt8>> {
        guard bytes.last == newline else { return bytes }
        let line = bytes.dropLast()
        return line.last == carriageReturn ? line.dropLast() : line
    }
}
