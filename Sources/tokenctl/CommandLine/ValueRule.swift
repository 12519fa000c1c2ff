import FoundationEssentials

/// What an option's value must look like. The parser rejects anything else with a usage error.
enum ValueRule: Sendable, Equatable {
    /// Any non-empty string.
    case any
    /// One of a fixed list of words, e.g. the item kinds.
    case oneOf([String])
    /// A file descriptor number or count: digits only, fits in an `Int32`.
    case nonNegativeInteger
    /// A count of something, e.g. seconds: digits only, 1 or more, fits in an `Int32`.
    case positiveInteger
    /// A TCP port: digits only, 1 to 65535.
    case port
    /// An absolute `http` or `https` URL with a host.
    case httpURL
    /// A value a server made (a base64url nonce): any non-empty string, taken even when it
    /// begins with `-`, as getopt takes a required argument (one nonce in 64 does).
    case opaque

    /// Whether `value` satisfies the rule.
    func accepts(_ value: String) -> Bool {
        switch self {
        case .any, .opaque:
            return !value.isEmpty
        case .oneOf(let words):
            return words.contains(value)
        case .nonNegativeInteger:
            return value.allSatisfy(\.isASCII) && Int32(value).map { $0 >= 0 } == true
        case .positiveInteger:
            return value.allSatisfy(\.isASCII) && Int32(value).map { $0 >= 1 } == true
        case .port:
            return value.allSatisfy(\.isASCII) && Int32(value).map { (1...65535).contains($0) } == true
        case .httpURL:
            guard let components = URLComponents(string: value),
                let scheme = components.scheme?.lowercased(),
                scheme == "https" || scheme == "http",
                let host = components.host, !host.isEmpty
            else { return false }
            return true
        }
    }

    /// Whether the rule takes numbers, so that `-5` after the option is its (refused) value, not an option.
    var isNumeric: Bool {
        switch self {
        case .nonNegativeInteger, .positiveInteger, .port: return true
        default: return false
        }
    }

    /// The expectation stated in an error for `value`: for a negative number given to a numeric
    /// option, the bound it breaks (`must be ≥ 0`); else ``expectation``.
    func expectation(for value: String) -> String {
        guard isNumeric, value.hasPrefix("-"), Int(value.dropFirst()) != nil else { return expectation }
        switch self {
        case .nonNegativeInteger: return "must be ≥ 0"
        case .positiveInteger: return "must be ≥ 1"
        default: return expectation
        }
    }

    /// The expectation stated in an error, e.g. `expected one of refresh-token, generic`.
    var expectation: String {
        switch self {
        case .any, .opaque: return "expected a non-empty value"
        case .oneOf(let words): return "expected one of \(words.joined(separator: ", "))"
        case .nonNegativeInteger: return "expected a non-negative integer"
        case .positiveInteger: return "expected a positive integer"
        case .port: return "expected a port number from 1 to 65535"
        case .httpURL: return "expected an http or https URL"
        }
    }
}
