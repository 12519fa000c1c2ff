/// One positional argument of a command, such as `<user-id>` in `tokenctl state <user-id>`.
struct PositionalSpec: Sendable {
    /// The name shown as `<name>` in help and usage.
    let name: String
    /// One sentence shown in the help's ARGUMENTS section.
    let abstract: String
    let isRequired: Bool

    init(_ name: String, required: Bool = true, _ abstract: String) {
        self.name = name
        self.abstract = abstract
        self.isRequired = required
    }

    /// `<name>` or `[<name>]`, as it appears in a usage line.
    var synopsis: String { isRequired ? "<\(name)>" : "[<\(name)>]" }
}
