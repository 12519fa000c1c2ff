import Foundation
import TestSupport

/// The operations crash_every_syscall kills at every state-changing call, each with the checks
/// that must hold after it (see ``CrashEverySyscallTests``).
extension CrashOperation {
    static let all: [CrashOperation] = [
        logout(offline: false), logout(offline: true), renewal(reuseInterval: 0), renewal(reuseInterval: 60),
        renewal(reuseInterval: 0, dpop: true), resume, rotateKey, put, delete, firstOpen,
    ]

    // MARK: Sessions

    static func logout(offline: Bool) -> CrashOperation {
        CrashOperation(
            name: offline ? "logout_offline" : "logout", setup: { try $0.signIn() },
            arguments: ["logout", "--account", "alice"], offline: offline
        ) { crash, _, findings in
            try verifyClean(crash, &findings)
            // At start-up an app finishes what a logout left (the server is reachable again).
            _ = try crash.run(["resume", "--all"])
            try noLostRevocation(crash, &findings)
            try noTokenForARevokedUser(crash, &findings)
            try nextOperation(crash, &findings)
            try verifyClean(crash, &findings)
        }
    }

    static func renewal(reuseInterval: Double, dpop: Bool = false) -> CrashOperation {
        CrashOperation(
            name: dpop ? "renewal_dpop" : (reuseInterval > 0 ? "renewal_reuse_interval" : "renewal"),
            reuseInterval: reuseInterval, setup: { try $0.signIn(dpop: dpop) },
            arguments: ["token", "--account", "alice", "--force"]
        ) { crash, _, findings in
            try verifyClean(crash, &findings)
            let rotated = try crash.server.stats().refreshGrants > crash.refreshGrantsBefore
            let next = try crash.run(["token", "--account", "alice", "--force"])
            if next.exitCode != 0 {
                findings.require(next.standardError.contains("interactionRequired"), "the next renewal failed: \(next.standardError)")
                // A session may be lost only inside a rotation: the server rotated, the process
                // died before the commit (the user signs in again).
                findings.require(rotated, "the session was lost although the server never rotated")
                findings.sessionLost = true
            }
            try noTokenForARevokedUser(crash, &findings)
            try verifyClean(crash, &findings)
        }
    }

    static let resume = CrashOperation(
        name: "resume",
        setup: { crash in
            try crash.signIn()
            try crash.server.inject(.drop(.reset, path: "/oauth/revoke", count: 10_000))
            let logout = try crash.run(["logout", "--account", "alice"])
            try crash.server.clearFaults()
            guard logout.exitCode == 75 else { throw CrashSetupError("offline logout: \(logout.exitCode) \(logout.standardError)") }
        },
        arguments: ["resume", "--all"]
    ) { crash, _, findings in
        try verifyClean(crash, &findings)
        _ = try crash.run(["resume", "--all"])
        try noLostRevocation(crash, &findings)
        try noTokenForARevokedUser(crash, &findings)
        let pending = try crash.run(["--json", "pending"])
        findings.require(pending.exitCode == 0 && !pending.standardOutput.contains("\"account\""), "an entry is still pending after resume")
    }

    // MARK: Storage

    static let rotateKey = CrashOperation(
        name: "rotate_key",
        setup: { crash in
            try crash.signIn()
            try crash.put("k1", "v1")
            try crash.put("k2", "v2")
        },
        arguments: ["rotate-key"]
    ) { crash, _, findings in
        try acknowledgedReadable(crash, &findings)
        try nextOperation(crash, &findings)
        try verifyClean(crash, &findings)
    }

    static let put = CrashOperation(
        name: "put", setup: { crash in
            try crash.put("k1", "v1")
            try crash.put("k2", "v2")
        },
        arguments: ["put", "--account", "k3", "--kind", "generic"], stdin: "v3"
    ) { crash, outcome, findings in
        try verifyClean(crash, &findings)
        try acknowledgedReadable(crash, &findings)
        let k3 = try crash.secret("k3")
        findings.require(k3 == nil || k3 == "v3", "the item being written reads back as something else")
        if outcome.result.exitCode == 0 { findings.require(k3 == "v3", "an acknowledged put is not readable") }
        try crash.put("k4", "v4")
        findings.require(try crash.secret("k4") == "v4", "the next put is not readable")
    }

    static let delete = CrashOperation(
        name: "delete", setup: { crash in
            for n in 1...3 { try crash.put("k\(n)", "v\(n)") }
        },
        arguments: ["delete", "--account", "k2", "--kind", "generic"]
    ) { crash, outcome, findings in
        try verifyClean(crash, &findings)
        for account in ["k1", "k3"] {
            findings.require(try crash.secret(account) == crash.acknowledged[account], "\(account) is not readable")
        }
        let k2 = try crash.secret("k2")
        findings.require(k2 == nil || k2 == "v2", "the item being deleted reads back as something else")
        if outcome.result.exitCode == 0 { findings.require(k2 == nil, "an acknowledged delete is undone") }
        findings.require(try crash.run(["delete", "--account", "k2", "--kind", "generic"]).exitCode == 0, "the next delete failed")
    }

    static let firstOpen = CrashOperation(
        name: "first_open", setup: { _ in },
        arguments: ["put", "--account", "k1", "--kind", "generic"], stdin: "v1"
    ) { crash, _, findings in
        // The store may not exist yet, or be half made: the next put makes or finishes it.
        let again = try crash.run(["put", "--account", "k1", "--kind", "generic"], stdin: "v1")
        findings.require(again.exitCode == 0, "the next put failed: \(again.exitCode) \(again.standardError)")
        findings.require(try crash.secret("k1") == "v1", "the item is not readable after the next put")
        try verifyClean(crash, &findings)
    }

    // MARK: Checks

    static func verifyClean(_ crash: CrashCase, _ findings: inout CrashFindings) throws {
        let verify = try crash.run(["verify"])
        findings.require(verify.exitCode == 0, "verify exited \(verify.exitCode): \(verify.standardOutput)\(verify.standardError)")
    }

    /// A refresh token taken off the account is revoked at the server or still queued.
    static func noLostRevocation(_ crash: CrashCase, _ findings: inout CrashFindings) throws {
        guard let original = crash.refreshToken else { return }
        guard try crash.secret("alice", kind: "refresh-token") != original else { return }  // still signed in
        let pending = try crash.run(["--json", "pending"])
        let queued = pending.exitCode == 0 && pending.standardOutput.contains("\"account\"")
        let active = try crash.server.introspect(original).active
        findings.require(queued || !active,
            "the refresh token left the account, is active at the server and is not queued")
    }

    /// A user recorded `revoked` has no token to hand out.
    static func noTokenForARevokedUser(_ crash: CrashCase, _ findings: inout CrashFindings) throws {
        guard try crash.run(["state", crash.userID]).standardOutput == "revoked\n" else { return }
        findings.require(try crash.secret("alice", kind: "refresh-token") == nil, "a revoked user's refresh token is readable")
        let token = try crash.run(["token", "--account", "alice"])
        findings.require(token.exitCode != 0, "a revoked user got an access token")
    }

    /// The next renewal gives a token or says "sign in again".
    static func nextOperation(_ crash: CrashCase, _ findings: inout CrashFindings) throws {
        let next = try crash.run(["token", "--account", "alice"])
        findings.require(next.exitCode == 0 || next.standardError.contains("interactionRequired"),
            "the next token call failed otherwise: \(next.exitCode) \(next.standardError)")
    }

    static func acknowledgedReadable(_ crash: CrashCase, _ findings: inout CrashFindings) throws {
        for (account, value) in crash.acknowledged {
            findings.require(try crash.secret(account) == value, "acknowledged \(account) is not readable")
        }
    }
}
