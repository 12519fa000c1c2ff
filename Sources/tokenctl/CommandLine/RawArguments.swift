#if canImport(Glibc)
import Glibc
#endif

/// The command-line arguments as the kernel passed them, checked for UTF-8.
///
/// `CommandLine.arguments` decodes each argument with repair: invalid bytes become U+FFFD, so
/// `caf\xe9` and `caf\xe8` would both read as "caf\u{FFFD}" and name the same item. This reads
/// `CommandLine.unsafeArgv` and validates the bytes instead.
enum RawArguments {
    /// The arguments after the program name, or the 1-based position of the first that is not UTF-8.
    enum Outcome: Equatable {
        case valid([String])
        case invalidUTF8(position: Int)
    }

    /// Reads the process's arguments (without the program name).
    static func read() -> Outcome {
        var strings: [String] = []
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { break }
            let bytes = UnsafeBufferPointer(start: pointer, count: strlen(pointer)).map { UInt8(bitPattern: $0) }
            guard let string = validated(bytes) else { return .invalidUTF8(position: index) }
            strings.append(string)
        }
        return .valid(strings)
    }

    /// `bytes` as a String when they are valid UTF-8, else nil (never repaired).
    static func validated(_ bytes: [UInt8]) -> String? {
        String(validating: bytes, as: UTF8.self)
    }
}
