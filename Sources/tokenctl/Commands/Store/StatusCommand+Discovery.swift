import AuthSession
import TokenStore

extension StatusCommand {
    /// What `status` shows of the discovery document the session commands keep sealed in the
    /// store: the newest one (an `--issuer` server's endpoints), a change of endpoints the server
    /// made, or why it could not be read.
    enum DiscoveryStatus {
        case none
        case document(ServerDocument, AuthorizationServerMetadata?, problem: String?)
        case unreadable(String)

        var json: JSONValue {
            switch self {
            case .none: return .null
            case .unreadable(let problem): return ["problem": .string(problem)]
            case .document(let document, let metadata, let problem):
                var object: [String: JSONValue] = [
                    "issuer": .string(document.issuer), "fetchedAt": .string(Format.date(document.fetchedAt)),
                    "authorizationEndpoint": Format.optional(metadata?.authorizationEndpoint.absoluteString),
                    "tokenEndpoint": Format.optional(metadata?.tokenEndpoint.absoluteString),
                    "revocationEndpoint": Format.optional(metadata?.revocationEndpoint?.absoluteString),
                ]
                if let problem { object["problem"] = .string(problem) }
                if let changedAt = document.changedAt, let previous = document.previousEndpoints {
                    object["endpointsChangedAt"] = .string(Format.date(changedAt))
                    object["previousTokenEndpoint"] = .string(previous.token)
                    object["previousRevocationEndpoint"] = Format.optional(previous.revocation)
                }
                return .object(object)
            }
        }

        func appendRows(to table: inout TextTable) {
            switch self {
            case .none: return
            case .unreadable(let problem):
                table.append(["issuer", "unknown: the discovery document kept in the store does not open (\(problem))"])
            case .document(let document, let metadata, let problem):
                table.append(["issuer", "\(document.issuer) (discovered \(Format.date(document.fetchedAt)))"])
                guard let metadata else {
                    table.append(["discovery", "not used: \(problem ?? "it fails the checks")"])
                    return
                }
                table.append(["authorization", metadata.authorizationEndpoint.absoluteString])
                table.append(["token endpoint", metadata.tokenEndpoint.absoluteString])
                table.append([
                    "revocation", metadata.revocationEndpoint?.absoluteString ?? "none (logout deletes the tokens here only)",
                ])
                if let changedAt = document.changedAt, let previous = document.previousEndpoints {
                    table.append([
                        "endpoints changed",
                        "\(Format.date(changedAt)) by the server (token endpoint was \(previous.token); revocation was "
                            + "\(previous.revocation ?? "none"))",
                    ])
                }
            }
        }
    }

    /// The newest discovery document of the store, read through a read-only open; `.none` when
    /// there is none or the store cannot be opened (status reports that elsewhere).
    static func discovery(_ context: CommandContext) -> DiscoveryStatus {
        guard let store = try? context.openStore(readOnly: true) else { return .none }
        defer { store.close() }
        do {
            guard let newest = try DiscoveryCache.documents(in: store).max(by: { $0.document.fetchedAt < $1.document.fetchedAt })
            else { return .none }
            return .document(newest.document, newest.metadata, problem: newest.problem)
        } catch let error as TokenStoreError {
            return .unreadable("\(error.code.rawValue): \(error.message)")
        } catch {
            return .unreadable("\(type(of: error))")
        }
    }
}
