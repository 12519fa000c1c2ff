/// The scaffolding shared by the package's error types (`TokenStoreError`, `AuthSessionError`):
/// a stable code, equality by code, matching in `catch` by code, and the head of `description`.
///
/// Not public: apps see only what each error type declares. A conforming type adds one public
/// line, because an operator from a `package` protocol extension is invisible outside the package:
///
/// ```swift
/// public static func ~= (pattern: Self, error: any Error) -> Bool { matches(pattern, error) }
/// ```
package protocol CodedError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The type of the stable code.
    associatedtype Code: ErrorCode
    /// The stable code; equality and matching look at nothing else.
    var code: Code { get }
    /// What went wrong, for a developer. Never contains a secret or an identifier.
    var message: String { get }
    /// An error of another type that this one carries as its cause and that the patterns of
    /// that type should still match (`AuthSessionError.storage` carries a `TokenStoreError`).
    var underlyingError: (any Error)? { get }
}

extension CodedError {
    /// No underlying error by default.
    package var underlyingError: (any Error)? { nil }

    /// Errors are equal when their codes are: message, hint and cause are ignored, so
    /// `#expect(throws: TokenStoreError.keyringLocked) { … }` checks the code only.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    /// True when `error`, or an error it carries as ``underlyingError`` (at any depth), is a
    /// `Self` with the code of `pattern`. The body of each type's public `~=`.
    package static func matches(_ pattern: Self, _ error: any Error) -> Bool {
        var candidate: (any Error)? = error
        while let current = candidate {
            if let match = current as? Self { return match.code == pattern.code }
            candidate = (current as? any CodedError)?.underlyingError
        }
        return false
    }

    /// `TypeName.code: message`, the start of every `description`.
    package var descriptionHead: String { "\(Self.self).\(code.rawValue): \(message)" }
}

/// The scaffolding of a stable error code: a string-backed struct, not an enum, so that a new
/// code in a later version does not break an app's `switch` (which needs a `default:`).
package protocol ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible, CaseIterable
where RawValue == String, AllCases == [Self] {
    /// Makes a code from its raw value, known or not.
    init(rawValue: String)
}

extension ErrorCode {
    /// The raw value, e.g. `keyringLocked`: stable API, printed by `tokenctl --json`.
    public var description: String { rawValue }

    /// The code with this raw value when this version defines it (one of `allCases`), else `nil`.
    package init?(known rawValue: String) {
        guard Self.allCases.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.init(rawValue: rawValue)
    }
}
