import TokenStore

extension SecretInput {
    /// The recovery key read from the open file descriptor `fd` to its end (`--recovery-key-fd N`),
    /// as printed by `slot add recovery`: dashes, spaces, case and a final newline do not matter.
    /// - Throws: `CommandFailure` (64) for a descriptor that cannot be read or a text that is not a
    ///   recovery key (mistyped: its checksum does not match).
    static func recoveryKey(fileDescriptor fd: Int32) throws -> RecoveryKey {
        let text: SecretBytes
        do {
            text = try POSIXFile.readToEnd(fd, capacity: 1024) { bytes in
                guard bytes.count < 1024 else { throw CommandFailure(.usage, "the recovery key read from file descriptor \(fd) is too long") }
                return SecretBytes(bytes)
            }
        } catch let failure as POSIXFile.Failure {
            throw CommandFailure(
                .usage, "cannot read the recovery key from file descriptor \(fd): \(errorText(failure.errno))",
                hint: "open it for the command, e.g. 'tokenctl --recovery-key-fd 3 status 3<recovery-key-file'")
        }
        do {
            return try RecoveryKey(text: text)
        } catch {
            throw CommandFailure(
                .usage, "the text read from file descriptor \(fd) is not a recovery key as printed (it may be mistyped)",
                hint: "give the 72 letters of cbdefghijklnrtuv that 'tokenctl slot add recovery' printed; dashes and spaces do not matter")
        }
    }
}
