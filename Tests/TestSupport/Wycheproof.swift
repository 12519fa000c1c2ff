import Foundation

/// Project Wycheproof's test vectors (C2SP/wycheproof, `testvectors_v1` JSON), read in place from
/// the folder beside the repository (`../shared/vectors/wycheproof`), never copied into it.
///
/// Where they are: `TOKENSTORE_WYCHEPROOF_DIR`, else `<repository>/../shared/vectors/wycheproof`.
/// When they are not there the suite fails, naming the folder it looked in: a checkout without
/// the vectors must not pass as if it had checked them. `TOKENSTORE_WYCHEPROOF_SKIP=1` is the one
/// way to run without them; the suite then shows as skipped, saying why.
public enum Wycheproof {
    /// The variable naming the vectors' folder.
    public static let directoryVariable = "TOKENSTORE_WYCHEPROOF_DIR"
    /// The variable that, set to `1`, skips the vectors knowingly.
    public static let skipVariable = "TOKENSTORE_WYCHEPROOF_SKIP"

    /// The vectors' folder for `environment`.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let path = environment[directoryVariable], !path.isEmpty { return URL(fileURLWithPath: path, isDirectory: true) }
        return repositoryRoot.appendingPathComponent("../shared/vectors/wycheproof", isDirectory: true).standardizedFileURL
    }

    /// Whether `environment` opts out of the vectors.
    public static func isSkipped(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        environment[skipVariable] == "1"
    }

    /// A vector file that is not where it should be, or not a Wycheproof file.
    public struct Missing: Error, CustomStringConvertible {
        public let description: String
    }

    /// One vector file: its groups (each a JSON object whose `tests` are the cases).
    public struct File: @unchecked Sendable {  // immutable after load; JSON values only
        public let name: String
        /// `numberOfTests` from the file's header: every case must get a verdict.
        public let numberOfTests: Int
        public let groups: [[String: Any]]
    }

    /// Loads `name` from ``directory(environment:)``.
    /// - Throws: ``Missing`` (no such file, naming the folder and both variables; not JSON; no groups).
    public static func load(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> File {
        let url = directory(environment: environment).appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw Missing(
                description: "Wycheproof vector file \(name) not found in \(url.deletingLastPathComponent().path): "
                    + "the vectors are read in place from ../shared/vectors/wycheproof beside the repository. "
                    + "Put them there, set \(directoryVariable) to their folder, or set \(skipVariable)=1 "
                    + "to run without them knowingly.")
        }
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let groups = object["testGroups"] as? [[String: Any]], let count = object["numberOfTests"] as? Int
        else { throw Missing(description: "\(url.path) is not a Wycheproof vector file (no testGroups / numberOfTests)") }
        return File(name: name, numberOfTests: count, groups: groups)
    }

    /// The bytes of hex `text` (the vectors' encoding), or `nil` for an odd length or a non-hex digit.
    public static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// `bytes` as lowercase hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: text, as: UTF8.self)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// The verdicts on one vector file, and its `METRIC wycheproof` line.
///
/// A `valid` case must be accepted and an `invalid` one refused; an `acceptable` case may go
/// either way and is counted with its flags. A refusal because the code does not implement the
/// case's algorithm at all (an ID token signed HS256 or ES256 where only RS256 is accepted) is
/// counted apart, `unsupported_alg_refused`, whatever the vector's result: refusing is the
/// right answer for an algorithm the code never accepts.
public struct WycheproofTally: Sendable {
    public let file: String
    public private(set) var cases = 0
    public private(set) var validAccepted = 0
    public private(set) var invalidRefused = 0
    public private(set) var acceptableAccepted = 0
    public private(set) var acceptableRefused = 0
    /// `flag:accepted|refused` → count, over the `acceptable` cases.
    public private(set) var acceptableFlags: [String: Int] = [:]
    /// Refused for an unsupported algorithm, by the vector's result.
    public private(set) var unsupportedRefused: [String: Int] = [:]
    /// One line per wrong verdict: the case id, its result, what the code did, why.
    public private(set) var wrong: [String] = []

    public init(file: String) { self.file = file }

    public var acceptable: Int { acceptableAccepted + acceptableRefused }
    public var unsupported: Int { unsupportedRefused.values.reduce(0, +) }

    /// Records the code's verdict on case `id` whose `result` is valid/invalid/acceptable.
    /// - Parameters:
    ///   - unsupportedAlgorithm: the case's algorithm is one the code never accepts: a refusal is
    ///     right (counted apart) and an acceptance wrong, whatever the vector's result.
    ///   - note: what the code said (an error's check), kept for a wrong verdict's line.
    public mutating func record(
        id: Int, result: String, flags: [String], accepted: Bool, unsupportedAlgorithm: Bool = false, note: String = ""
    ) {
        cases += 1
        let verdict = accepted ? "accepted" : "refused"
        if unsupportedAlgorithm {
            if accepted {
                wrong.append("tcId \(id) (\(result), flags \(flags)): accepted an unsupported algorithm \(note)")
            } else {
                unsupportedRefused[result, default: 0] += 1
            }
            return
        }
        switch (result, accepted) {
        case ("valid", true): validAccepted += 1
        case ("invalid", false): invalidRefused += 1
        case ("acceptable", _):
            if accepted { acceptableAccepted += 1 } else { acceptableRefused += 1 }
            for flag in flags.isEmpty ? ["none"] : flags { acceptableFlags["\(flag):\(verdict)", default: 0] += 1 }
        default:
            wrong.append("tcId \(id) (\(result), flags \(flags)): \(verdict) \(note)")
        }
    }

    /// `METRIC wycheproof file=… cases=… valid_accepted=… invalid_refused=… acceptable=… wrong=…`,
    /// then (when there are any) the acceptable cases' flags and the unsupported-algorithm
    /// refusals, in all and by the vectors' result (`unsupported_alg_refused_valid=…`).
    public var metricLine: String {
        var line = "METRIC wycheproof file=\(file) cases=\(cases) valid_accepted=\(validAccepted) "
            + "invalid_refused=\(invalidRefused) acceptable=\(acceptable) wrong=\(wrong.count)"
        if acceptable > 0 {
            line += " acceptable_flags=" + acceptableFlags.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
        }
        if unsupported > 0 {
            line += " unsupported_alg_refused=\(unsupported)"
            for (result, count) in unsupportedRefused.sorted(by: { $0.key < $1.key }) { line += " unsupported_alg_refused_\(result)=\(count)" }
        }
        return line
    }
}
