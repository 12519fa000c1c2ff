/// The candidate closest to `word` by edit distance, if it is close enough to be a likely typo.
///
/// Used for "did you mean" hints; it only ever returns a name from the table, never `word`.
func closestMatch(to word: String, among candidates: [String], maximumDistance: Int = 2) -> String? {
    let scored = candidates.map { (candidate: $0, distance: editDistance(word, $0)) }
    guard let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= maximumDistance,
        best.distance < word.count
    else { return nil }
    return best.candidate
}

/// The Levenshtein distance between two strings, by characters.
private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    var previous = Array(0...b.count)
    for (i, charA) in a.enumerated() {
        var current = [i + 1] + Array(repeating: 0, count: b.count)
        for (j, charB) in b.enumerated() {
            current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (charA == charB ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
