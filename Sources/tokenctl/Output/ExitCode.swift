/// tokenctl's exit statuses, after BSD `sysexits.h`.
enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    /// Anything not covered below.
    case failure = 1
    /// `EX_USAGE`: the command line does not match the command table.
    case usage = 64
    /// `EX_DATAERR`: integrity failure, tampered row, corrupt database.
    case dataError = 65
    /// `EX_NOINPUT`: no store at the given path (or an empty file), for a command that only reads.
    case noInput = 66
    /// `EX_UNAVAILABLE`: no Secret Service, server unreachable after retries.
    case unavailable = 69
    /// `EX_TEMPFAIL`: keyring locked, revocation pending, rate limited, busy.
    case tempFailure = 75
    /// `EX_NOPERM`: unsafe file layout or permissions.
    case noPermission = 77
    /// `EX_CONFIG`: what was asked cannot work with the server's configuration, e.g. a
    /// `--min-ttl` longer than the server's access tokens live (`minimumTTLTooLarge`).
    case config = 78
}
