/// The name Apple gives an app on the user's first authorization only, passed to
/// ``TokenSession/signInWithApple(authorizationCode:appleUserID:account:scopes:fullName:allowsUserChange:)``.
/// The fields of Foundation's `PersonNameComponents` that Auth0's `user_profile` takes
/// (Foundation's type needs full Foundation and ICU, which this package does not link).
public struct PersonName: Sendable, Hashable {
    public var givenName: String?
    public var middleName: String?
    public var familyName: String?

    public init(givenName: String? = nil, middleName: String? = nil, familyName: String? = nil) {
        self.givenName = givenName
        self.middleName = middleName
        self.familyName = familyName
    }
}
