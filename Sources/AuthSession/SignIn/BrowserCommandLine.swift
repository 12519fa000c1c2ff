/// The commands of a `$BROWSER` value, the way xdg-open and Python's `webbrowser` read it.
///
/// - Several commands are separated by `:`; each is tried in order.
/// - A command is split into words like a shell would, without running one: blanks separate
///   words, `'…'` quotes literally, `"…"` quotes with `\"`, `\\`, `\$` and `` \` `` escapes,
///   and a backslash outside quotes escapes the next character.
/// - `%s` in a word is replaced by the URL (and `%%` by `%`); without any `%s` the URL is
///   appended as the last argument.
enum BrowserCommandLine {
    /// The commands of `value`, each as its words; empty commands are skipped, and a
    /// command with an unterminated quote is returned as `nil` (it cannot run).
    static func commands(in value: String) -> [[String]?] {
        value.split(separator: ":", omittingEmptySubsequences: true).compactMap { command in
            guard let words = words(of: Substring(command)) else { return .some(nil) }
            return words.isEmpty ? nil : .some(words)
        }
    }

    /// The argument vector of `words` for `url`.
    static func arguments(_ words: [String], url: String) -> [String] {
        guard words.contains(where: { $0.contains("%s") }) else { return words + [url] }
        return words.map { substitute($0, url: url) }
    }

    private static func substitute(_ word: String, url: String) -> String {
        var output = ""
        var characters = word.makeIterator()
        while let character = characters.next() {
            guard character == "%" else {
                output.append(character)
                continue
            }
            switch characters.next() {
            case "s": output += url
            case "%": output.append("%")
            case let other?: output.append("%"); output.append(other)
            case nil: output.append("%")
            }
        }
        return output
    }

    /// Shell-like word splitting without expansions; `nil` for an unterminated quote or a
    /// trailing backslash.
    static func words(of text: Substring) -> [String]? {
        var words: [String] = []
        var current = ""
        var inWord = false
        var characters = text.makeIterator()
        while let character = characters.next() {
            switch character {
            case " ", "\t", "\n":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case "'":
                inWord = true
                var closed = false
                while let next = characters.next() {
                    if next == "'" { closed = true; break }
                    current.append(next)
                }
                guard closed else { return nil }
            case "\"":
                inWord = true
                var closed = false
                while let next = characters.next() {
                    if next == "\"" { closed = true; break }
                    if next == "\\" {
                        guard let escaped = characters.next() else { return nil }
                        if !["\"", "\\", "$", "`", "\n"].contains(escaped) { current.append("\\") }
                        current.append(escaped)
                        continue
                    }
                    current.append(next)
                }
                guard closed else { return nil }
            case "\\":
                guard let escaped = characters.next() else { return nil }
                inWord = true
                current.append(escaped)
            default:
                inWord = true
                current.append(character)
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
