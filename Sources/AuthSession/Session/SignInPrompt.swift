import FoundationEssentials

/// What the authorization server is asked to show in a browser sign-in (OIDC Core 3.1.2.1 `prompt`).
///
/// ```swift
/// // "Sign in as someone else": the server asks for credentials even with a live browser session.
/// try await session.signIn(account: "me", redirectURIs: uris, prompt: .login)
/// ```
public enum SignInPrompt: String, Sendable, CaseIterable {
    /// `login`: ask for the user's credentials again, even when the browser has a session there.
    case login
    /// `select_account`: let the user choose among the accounts the browser is signed in with.
    case selectAccount = "select_account"
    /// `consent`: ask the user to consent again to what the app asks for.
    case consent
    /// `none`: show nothing; the server answers at once from its browser session, or fails.
    /// A server that would have to ask the user (`login_required`, `interaction_required`,
    /// `consent_required`, `account_selection_required`) makes the sign-in throw
    /// ``AuthSessionError/Code/interactionRequired``.
    case none
}

/// Who is asked to sign in, and how recently and strongly: the browser sign-in's `prompt`,
/// `login_hint`, `max_age` and `acr_values`, checked before anything is sent.
struct AuthenticationRequest: Sendable {
    var prompt: SignInPrompt?
    /// An identifier (an email address, a user name): never logged, never in an error text.
    var loginHint: String?
    var maxAge: Duration?
    var acrValues: [String] = []

    /// The OAuth errors of an authorization redirect that say the user has to act in the
    /// browser (OIDC Core 3.1.2.6), as a `prompt=none` sign-in gets them.
    static let interactionErrors: Set<String> = [
        "login_required", "interaction_required", "consent_required", "account_selection_required",
    ]

    /// The request, its values checked.
    /// - Throws: ``AuthSessionError/Code/invalidRequest`` for a negative `maxAge`, an empty or
    ///   control-character `loginHint`, or an `acr` value that is empty or holds a space or a
    ///   control character (the message never holds the hint).
    init(prompt: SignInPrompt?, loginHint: String?, maxAge: Duration?, acrValues: [String]) throws(AuthSessionError) {
        if let maxAge, maxAge < .zero {
            throw AuthSessionError(.invalidRequest, "max_age must not be negative.")
        }
        if let loginHint, loginHint.isEmpty || loginHint.unicodeScalars.contains(where: Self.isControl) {
            throw AuthSessionError(.invalidRequest, "The login hint is empty or holds a control character.")
        }
        for value in acrValues
        where value.isEmpty || value.unicodeScalars.contains(where: { $0 == " " || Self.isControl($0) }) {
            throw AuthSessionError(
                .invalidRequest, "An acr value is empty or holds a space or a control character (acr_values is space-separated).")
        }
        self.prompt = prompt
        self.loginHint = loginHint
        self.maxAge = maxAge
        self.acrValues = acrValues
    }

    /// The authorization request's parameters for these choices, in a stable order.
    var parameters: [(String, FormValue)] {
        var query: [(String, FormValue)] = []
        if let prompt { query.append(("prompt", .text(prompt.rawValue))) }
        if let loginHint { query.append(("login_hint", .text(loginHint))) }
        if let maxAge { query.append(("max_age", .text("\(maxAge.components.seconds)"))) }
        if !acrValues.isEmpty { query.append(("acr_values", .text(acrValues.joined(separator: " ")))) }
        return query
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F
    }

    /// `error` as thrown by the sign-in wait, with a redirect `error=` that says the user must
    /// act (``interactionErrors``) turned into ``AuthSessionError/Code/interactionRequired``
    /// (the server's text kept as untrusted detail).
    static func interactionError(_ error: any Error) -> any Error {
        guard let failure = error as? AuthSessionError, failure.code == .authorizationFailed,
            let oauthError = failure.oauthError, interactionErrors.contains(oauthError)
        else { return error }
        return AuthSessionError(
            .interactionRequired,
            "The authorization server needs the user to act in the browser (\(oauthError)): sign in without "
                + "prompt=none.",
            oauthError: oauthError, oauthErrorDescription: failure.oauthErrorDescription)
    }
}
