extension TokenStoreError {
    /// The code of `error` for a log line: a TokenStoreError's code, or "unexpected".
    static func code(of error: any Error) -> String {
        (error as? TokenStoreError)?.code.rawValue ?? "unexpected"
    }
}
