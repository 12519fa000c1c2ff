import AuthSession
import Foundation
import TokenStore

/// The decoders under fuzzing. Each target states, beyond "no crash, hang or leak", the
/// properties it checks on every input.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// `RecordFields.decode` (the plaintext layout inside a sealed blob): a decoded record
    /// re-encodes to the same number of bytes and decodes to the same fields.
    case record
    /// `Sealer.open` with a fixed key: garbage, a tampered copy of a real blob, or a real blob
    /// under another binding never opens; only the exact blob opens, to the exact plaintext.
    case sealed
    /// `ResponseClassifier.decodeTokenResponse` / `classify` / `revocationResult` over an
    /// arbitrary status, headers and body.
    case token
    /// `RetryAfter.parse`, `parseRateLimitReset`, `parseHTTPDate`.
    case retryafter
    /// `AuthenticationChallenge.parse(headerValues:)` (`WWW-Authenticate`) and its accessors.
    case challenge

    /// The target named by FUZZ_TARGET (libFuzzer mode).
    static let selected: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(
                Data("tokenstore-fuzz: set FUZZ_TARGET to one of \(allCases.map(\.rawValue))\n".utf8))
            exit(2)
        }
        return target
    }()

    func run(_ input: UnsafeRawBufferPointer) {
        switch self {
        case .record: RecordTarget.run(input)
        case .sealed: SealedTarget.run(input)
        case .token: TokenTarget.run(input)
        case .retryafter: RetryAfterTarget.run(input)
        case .challenge: ChallengeTarget.run(input)
        }
    }
}

// MARK: - record

enum RecordTarget {
    static func run(_ input: UnsafeRawBufferPointer) {
        guard let fields = try? RecordFields.decode(input) else { return }
        let encoded = fields.encode()
        // decode accepts no trailing bytes and every field is (tag, u32 length, bytes): the
        // re-encoding has exactly the input's size.
        FuzzCheck.require(encoded.count == input.count, "re-encoded \(encoded.count) bytes from \(input.count)")
        let again: RecordFields
        do {
            again = try encoded.withUnsafeBytes { try RecordFields.decode($0) }
        } catch {
            FuzzCheck.require(false, "the re-encoded record does not decode: \(error)")
            return
        }
        FuzzCheck.require(again.entries.count == fields.entries.count, "field count changed")
        for (a, b) in zip(again.entries, fields.entries) {
            FuzzCheck.require(a.tag == b.tag && a.bytes == b.bytes, "field \(a.tag) changed in the round trip")
        }
        FuzzCheck.require(again.secret == fields.secret, "secret changed in the round trip")
        // encode() writes the secret last: when the input had it last (or not at all) the bytes match.
        let secretLast = fields.secret == nil || input.count >= 7 && secretIsLast(input)
        if secretLast {
            let same = encoded.withUnsafeBytes { $0.elementsEqual(input) }
            FuzzCheck.require(same, "the re-encoding differs from a canonical input")
        }
    }

    /// Walks the (already validated) layout and tells whether tag 4 (the secret) is the last field.
    private static func secretIsLast(_ input: UnsafeRawBufferPointer) -> Bool {
        var offset = 2
        var lastTag: UInt8 = 0
        while offset < input.count {
            lastTag = input[offset]
            var length = 0
            for index in 0..<4 { length |= Int(input[offset + 1 + index]) << (8 * index) }
            offset += 5 + length
        }
        return lastTag == 4
    }
}

// MARK: - sealed

enum SealedTarget {
    static let key: DataKey = {
        do {
            return try DataKey(keyID: Array(repeating: 0x4B, count: 16), material: SecretBytes((0..<32).map { UInt8($0 * 7 + 1) }))
        } catch {
            fatalError("fixed fuzz key: \(error)")
        }
    }()
    static let binding = Sealer.Binding(
        storeID: Array(repeating: 0x53, count: 16), keyID: Array(repeating: 0x4B, count: 16), kind: .item,
        rowKey: (0..<32).map { UInt8(255 - $0) })
    /// A valid record: account "alice", a secret.
    static let plaintext: [UInt8] = {
        let account = Array("alice".utf8), secret = Array("rt-fuzz-secret-0123456789".utf8)
        return [0x54, 1, 2, UInt8(account.count), 0, 0, 0] + account + [4, UInt8(secret.count), 0, 0, 0] + secret
    }()
    /// The genuine blob, sealed once per process with a fresh random nonce (so it is in no corpus).
    static let genuine: [UInt8] = plaintext.withUnsafeBytes { Sealer.seal($0, key: key, binding: binding) }

    static func run(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        let rest = Array(input.dropFirst())
        switch mode % 3 {
        case 0:
            // Raw garbage as a blob.
            attempt(rest, binding: binding, mayOpen: rest == genuine)
        case 1:
            // A tampered genuine blob: XOR `rest` over it; its length becomes rest.count
            // (shorter truncates, longer appends the extra mask bytes).
            var blob = [UInt8]()
            blob.reserveCapacity(rest.count)
            for (index, mask) in rest.enumerated() {
                blob.append(index < genuine.count ? genuine[index] ^ mask : mask)
            }
            attempt(blob, binding: binding, mayOpen: blob == genuine)
        default:
            // The genuine blob under another binding (kind from the first byte, row key from the rest).
            let kinds: [RecordKind] = [.keyCheck, .item, .credentialUser, .pendingRevocation]
            let kind = kinds[Int((rest.first ?? 1) % 4)]
            let rowKey = Array(rest.dropFirst())
            let other = Sealer.Binding(storeID: Array(repeating: 0x53, count: 16), keyID: Array(repeating: 0x4B, count: 16), kind: kind, rowKey: rowKey)
            attempt(genuine, binding: other, mayOpen: kind == .item && rowKey == (0..<32).map { UInt8(255 - $0) })
        }
    }

    private static func attempt(_ blob: [UInt8], binding: Sealer.Binding, mayOpen: Bool) {
        do {
            let opened = try Sealer.open(blob, key: key, binding: binding)
            FuzzCheck.require(mayOpen, "FORGERY: a blob of \(blob.count) bytes that is not the genuine one opened")
            FuzzCheck.require(opened.withUnsafeBytes { $0.elementsEqual(plaintext) }, "the genuine blob opened to other bytes")
            let fields = try opened.withUnsafeBytes { try RecordFields.decode($0) }
            FuzzCheck.require(fields.secret?.count == 25, "the genuine record lost its secret")
        } catch let error as TokenStoreError {
            FuzzCheck.require(!mayOpen, "the genuine blob did not open: \(error)")
            FuzzCheck.require(error.code == .integrityCheckFailed, "a bad blob gave \(error.code), not integrityCheckFailed")
        } catch {
            FuzzCheck.require(false, "untyped error \(error)")
        }
    }
}

// MARK: - token

enum TokenTarget {
    static let receivedAt = Date(timeIntervalSince1970: 1_700_000_000)
    static let tenYears = Duration.seconds(315_576_000)

    /// Input layout: status (2 bytes, big-endian, mod 700), endpoint (1 byte), then header lines
    /// `Name: value` separated by `\n`, a blank line, and the body. No blank line: all body.
    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 3 else { return }
        let status = (Int(input[0]) << 8 | Int(input[1])) % 700
        let endpoint = Endpoint.allCases[Int(input[2]) % Endpoint.allCases.count]
        let rest = Array(input[3...])
        var headerBytes: [UInt8] = []
        var body = rest
        if let split = findBlankLine(rest) {
            headerBytes = Array(rest[..<split])
            body = Array(rest[(split + 2)...])
        }
        var pairs: [(String, String)] = []
        for line in headerBytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            let text = String(decoding: line, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":") else { continue }
            pairs.append((String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }
        let headers = HTTPHeaders(pairs)
        let data = Data(body)

        // classify: the status decides the class.
        let responseClass = ResponseClassifier.classify(status: status, headers: headers, body: data, endpoint: endpoint, now: receivedAt)
        switch responseClass {
        case .success:
            FuzzCheck.require((200..<300).contains(status), "status \(status) classed success")
        case .retryable(_, let delay):
            FuzzCheck.require(status == 408 || status == 429 || (500..<600).contains(status), "status \(status) classed retryable")
            if let delay { FuzzCheck.require(delay >= .zero && delay <= RetryAfter.ceiling, "server delay \(delay) out of range") }
        case .permanent:
            FuzzCheck.require(
                !(200..<300).contains(status) && status != 408 && status != 429 && !(500..<600).contains(status),
                "status \(status) classed permanent")
        }
        let cap = Duration.seconds(60)
        switch ResponseClassifier.revocationResult(for: responseClass, retryAfterCap: cap) {
        case .retryLater(let error):
            if let after = error.retryAfter { FuzzCheck.require(after >= .zero && after <= cap, "retryAfter \(after) over the cap") }
        case .revoked, .failedPermanently:
            break
        }

        // decodeTokenResponse: success only for a 2xx JSON object with a non-empty access_token.
        do {
            let response = try ResponseClassifier.decodeTokenResponse(
                status: status, headers: headers, body: data, endpoint: endpoint, requestedScopes: ["openid"],
                receivedAt: receivedAt)
            FuzzCheck.require((200..<300).contains(status), "a token answer accepted with status \(status)")
            FuzzCheck.require(response.accessToken.count > 0, "an empty access token accepted")
            if let expiresIn = response.expiresIn {
                FuzzCheck.require(expiresIn >= .zero && expiresIn <= tenYears, "expires_in \(expiresIn) out of range")
                FuzzCheck.require(response.expiresAt != nil, "expiresIn without expiresAt")
            }
            FuzzCheck.require(response.tokenType.count <= 64, "token_type not bounded")
        } catch {
            if (200..<300).contains(status) {
                FuzzCheck.require(error.code == .unexpectedResponse, "a bad 2xx answer gave \(error.code)")
                // No secret-looking value of the answer may reach the error text.
                let text = "\(error)"
                for value in secretValues(data) {
                    FuzzCheck.require(!text.contains(value), "a token value appears in the error text")
                }
            }
            if let after = error.retryAfter { FuzzCheck.require(after >= .zero && after <= RetryAfter.ceiling, "retryAfter out of range") }
        }
    }

    private static func findBlankLine(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == 0x0A && bytes[index + 1] == 0x0A { return index }
        return nil
    }

    /// The string values of the token fields, when long and without spaces (so they cannot be a
    /// fragment of the library's fixed messages).
    private static func secretValues(_ body: Data) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) as? [String: Any]
        else { return [] }
        return ["access_token", "refresh_token", "id_token"].compactMap { object[$0] as? String }
            .filter { $0.count >= 24 && !$0.contains(" ") }
    }
}

// MARK: - retryafter

enum RetryAfterTarget {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    static func run(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        if let delay = RetryAfter.parse(text, now: now) {
            FuzzCheck.require(delay >= .zero && delay <= RetryAfter.ceiling, "Retry-After delay \(delay) out of range")
        }
        // delta-seconds: the exact value, up to the ceiling.
        let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        if !trimmed.isEmpty, trimmed.utf8.count <= 64, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            let significant = trimmed.drop { $0 == "0" }
            let expected: Duration =
                significant.count > 10 ? RetryAfter.ceiling : min(.seconds(Int64(significant.isEmpty ? "0" : String(significant))!), RetryAfter.ceiling)
            FuzzCheck.require(RetryAfter.parse(text, now: now) == expected, "delta-seconds parsed wrong")
        }
        if let delay = RetryAfter.parseRateLimitReset(text, now: now) {
            FuzzCheck.require(delay >= .zero && delay <= RetryAfter.ceiling, "X-RateLimit-Reset delay \(delay) out of range")
        }
        if let epoch = RetryAfter.parseHTTPDate(text) {
            // Any date it accepts, written back in IMF-fixdate and asctime form, parses to the same instant.
            let civil = Civil(epoch: epoch)
            if (0...9999).contains(civil.year) {
                for form in [civil.imfFixdate, civil.asctime] {
                    FuzzCheck.require(RetryAfter.parseHTTPDate(form) == epoch, "HTTP-date round trip failed for \(form)")
                }
            }
            // As a Retry-After value it is a delay from `now`, zero when past.
            if let delay = RetryAfter.parse(text, now: now), Double(epoch) <= now.timeIntervalSince1970 {
                FuzzCheck.require(delay == .zero, "a past date gave a delay")
            }
        }
    }

    /// A UTC calendar time from epoch seconds (H. Hinnant's civil_from_days).
    struct Civil {
        let year: Int64, month: Int, day: Int, weekday: Int, hour: Int, minute: Int, second: Int

        init(epoch: Int64) {
            var days = epoch / 86_400
            var seconds = epoch % 86_400
            if seconds < 0 {
                seconds += 86_400
                days -= 1
            }
            hour = Int(seconds / 3600)
            minute = Int(seconds % 3600 / 60)
            second = Int(seconds % 60)
            weekday = Int(((days % 7) + 7 + 3) % 7)  // 1970-01-01 was a Thursday; 0 = Monday
            let z = days + 719_468
            let era = (z >= 0 ? z : z - 146_096) / 146_097
            let doe = z - era * 146_097
            let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
            let mp = (5 * doy + 2) / 153
            day = Int(doy - (153 * mp + 2) / 5 + 1)
            month = Int(mp < 10 ? mp + 3 : mp - 9)
            year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        }

        static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

        private func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        private var four: String { String(repeating: "0", count: max(0, 4 - "\(year)".count)) + "\(year)" }
        private var clock: String { "\(two(hour)):\(two(minute)):\(two(second))" }

        var imfFixdate: String { "\(Self.days[weekday]), \(two(day)) \(Self.months[month - 1]) \(four) \(clock) GMT" }
        var asctime: String {
            "\(Self.days[weekday]) \(Self.months[month - 1]) \(day < 10 ? " \(day)" : "\(day)") \(clock) \(four)"
        }
    }
}

// MARK: - challenge

enum ChallengeTarget {
    /// Input: `WWW-Authenticate` field values separated by `\n` (any bytes, decoded leniently).
    /// Over the size limit the parse throws `unexpectedResponse`; otherwise it returns at most
    /// `maximumChallenges` challenges, each with a token scheme, at most `maximumParameters`
    /// lower-case names without repeats, and either a token68 or parameters. The accessors
    /// never trap, and a challenge's own parameters re-serialized parse back to it.
    static func run(_ input: UnsafeRawBufferPointer) {
        let values = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        let total = values.reduce(0) { $0 + $1.utf8.count }
        let challenges: [AuthenticationChallenge]
        do {
            challenges = try AuthenticationChallenge.parse(headerValues: values)
        } catch {
            FuzzCheck.require(total > AuthenticationChallenge.maximumHeaderBytes, "threw \(error.code.rawValue) for \(total) bytes")
            return
        }
        FuzzCheck.require(total <= AuthenticationChallenge.maximumHeaderBytes, "read \(total) bytes")
        FuzzCheck.require(challenges.count <= AuthenticationChallenge.maximumChallenges, "\(challenges.count) challenges")
        for challenge in challenges {
            FuzzCheck.require(!challenge.scheme.isEmpty, "empty scheme")
            let names = challenge.parameters.map(\.name)
            FuzzCheck.require(Set(names).count == names.count, "a repeated parameter name")
            FuzzCheck.require(names.allSatisfy { $0 == $0.lowercased() }, "a name not in lower case")
            FuzzCheck.require(names.count <= AuthenticationChallenge.maximumParameters, "\(names.count) parameters")
            FuzzCheck.require(challenge.token68 == nil || names.isEmpty, "both a token68 and parameters")
            _ = (challenge.maxAge, challenge.resourceMetadata, challenge.acrValues, challenge.algorithms, challenge.scope)
            _ = challenge.description
            guard challenge.token68 == nil else { continue }
            let quoted = challenge.parameters.map { "\($0.name)=\"" + escaped($0.value) + "\"" }
            let again = try? AuthenticationChallenge.parse(
                headerValues: [challenge.scheme + (quoted.isEmpty ? "" : " " + quoted.joined(separator: ", "))])
            FuzzCheck.require(again == [challenge], "the re-serialized challenge parses to \(again ?? [])")
        }
    }

    /// `value` with `"` and `\` escaped, scalar by scalar (a Character may join a quote with a
    /// combining mark after it, and would then not compare equal to `"`).
    private static func escaped(_ value: String) -> String {
        var text = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            if scalar == "\"" || scalar == "\\" { text.append("\\") }
            text.append(scalar)
        }
        return String(text)
    }
}
