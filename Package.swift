// swift-tools-version:6.0
import PackageDescription

// libtokenstore.so.1, the C ABI (include/tokenstore.h): the Swift runtime linked in
// (-static-stdlib), only ts_* exported (version script), a soname, and no RUNPATH at all, also
// from a plain `swift build --product tokenstore`: SwiftPM adds `-rpath=$ORIGIN` to every link
// unless the command line says --disable-local-rpath, and no linker flag takes an rpath away, so
// clang finds its linker (gold, or lld from scripts/release-link) first in scripts/linker/no-rpath
// (-B), a wrapper that drops every -rpath and fails the link if the output still has one.
// unsafeFlags work because this is the root package; see `make install` and scripts/test-cabi.
// The static archives -static-stdlib leaves out for a shared library, in one group so their
// order does not matter: FoundationEssentials only (TokenStore, AuthSession and TokenStoreC
// import nothing else of Foundation, so no ICU data and no CoreFoundation). Each goes through
// -Xlinker: swiftc moves plain -l flags away from the -Xlinker ones.
let cABIStaticFoundation = (["--start-group"] + [
    "FoundationEssentials", "_FoundationCollections", "_FoundationCShims",
    "swiftSynchronization", "swiftDispatch",
].map { "-l\($0)" } + ["--end-group"]).flatMap { ["-Xlinker", $0] }

// The release link's machine-dependent part (lld, DT_RELR where glibc is 2.36 or newer, the symbol
// ordering, tokenctl's static libstdc++) is not decided here: scripts/release-link prints those
// flags and `make install`, `make release` and debian/rules pass them on the command line.
// This manifest probes nothing; a plain `swift build` links with the toolchain's defaults.

// Under a sanitizer (scripts/sanitizers sets TOKENSTORE_SANITIZE) the library is linked plainly:
// a sanitized shared library leaves the sanitizer runtime's symbols to the executable, which
// -z defs refuses, and the suites under a sanitizer do not load it (scripts/test-cabi runs the
// C test under ASan against the normal build).
let cABILinkerSettings: [LinkerSetting] = Context.environment["TOKENSTORE_SANITIZE"] != nil ? [] : [
    .unsafeFlags(
        ["-static-stdlib", "-no-toolchain-stdlib-rpath"] + cABIStaticFoundation + [
            "-Xclang-linker", "-B\(Context.packageDirectory)/scripts/linker/no-rpath/",
            "-Xlinker", "-zdefs",  // fail the link on any undefined symbol
            "-Xlinker", "-soname=libtokenstore.so.1",
            "-Xlinker", "--version-script=\(Context.packageDirectory)/include/tokenstore.map",
        ])
]

// tokenctl (release builds) carries the Swift runtime and FoundationEssentials itself
// (-static-stdlib and the same static archives): a command then loads ~13 fewer shared
// libraries and their relocations, about a third of the start-up time of `tokenctl get`.
// Plain under a sanitizer, as the C ABI library.
// (scripts/release-link adds, with lld, libstdc++ from its static archive and no dynamic symbol table.)
let tokenctlLinkerSettings: [LinkerSetting] = Context.environment["TOKENSTORE_SANITIZE"] != nil ? [] : [
    .unsafeFlags(
        ["-static-stdlib"] + cABIStaticFoundation,
        .when(configuration: .release))
]

let package = Package(
    name: "TokenStore",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "TokenStore", targets: ["TokenStore"]),
        .library(name: "AuthSession", targets: ["AuthSession"]),
        .executable(name: "tokenctl", targets: ["tokenctl"]),
        // The C ABI: libtokenstore.so (installed as libtokenstore.so.1.x.y by `make install`).
        .library(name: "tokenstore", type: .dynamic, targets: ["TokenStoreC"]),
    ],
    targets: [
        // System libraries, one target each, found through pkg-config.
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        // libsecret and GIO: their include folders through pkg-config files without -pthread, which
        // libsecret-1.pc and gio-2.0.pc carry (gio's private gmodule-no-export-2.0) and SwiftPM
        // refuses with "warning: prohibited flag(s): -pthread" in every app's build. CLibSecret
        // names its own .pc file by absolute path (glib-2.0 + libsecret's include folder), CGIO
        // glib-2.0 (gio's headers are in glib's folder); the module maps link the libraries.
        // A package folder with a space cannot be named in `pkgConfig:` (it splits at spaces):
        // there libsecret-1 is used, with the warning.
        .systemLibrary(
            name: "CLibSecret", path: "Sources/CLibSecret",
            pkgConfig: Context.packageDirectory.contains(" ")
                ? "libsecret-1" : "\(Context.packageDirectory)/Sources/CLibSecret/libsecret-headers.pc",
            providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(
            name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]),
        // OpenSSL's libcrypto: RS256 verification of ID tokens. Only its headers: the library is
        // loaded at the first RS256 key (dlopen), not linked, so no pkgConfig here (it would add
        // -lcrypto); the test target links it (it signs test tokens).
        .systemLibrary(
            name: "CCrypto", path: "Sources/CCrypto",
            providers: [.apt(["libssl-dev"])]),
        // libcurl (OpenSSL flavour): the HTTP transport, without FoundationNetworking. Only its
        // header: the library is loaded at the first transfer (dlopen), not linked, so no
        // pkgConfig here (it would add -lcurl). The header is in the multiarch include directory.
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        // GIO: opening the user's browser (g_app_info_launch_default_for_uri, portal-aware), and
        // GDBus for the desktop session's lock (logind, a screensaver: SessionLockSource).
        .systemLibrary(
            name: "CGIO", path: "Sources/CGIO", pkgConfig: "glib-2.0",
            providers: [.apt(["libglib2.0-dev"])]),

        // tpm2-tss: ESYS, the TCTI loader, marshalling and response-code text (TPMKeyProvider).
        // Neither linked nor its headers needed: the libraries are loaded at the first TPM call
        // (dlopen), and the types the shim passes them are declared in tss2_declarations.h
        // (checked against tpm2-tss's headers by scripts/check-tss2-shim). No pkgConfig (it would
        // add -ltss2-esys, which brings libcrypto to every process), no libtss2-dev to build.
        .systemLibrary(name: "CTSS2", path: "Sources/CTSS2"),

        // glibc GNU extensions Swift's Glibc module leaves out (accept4, posix_spawn closefrom, prctl).
        .systemLibrary(name: "CGlibcExtensions", path: "Sources/CGlibcExtensions"),

        // Migrations/NNNN_name.sql compiled into the library at build time, with the schema after each
        // (the embedder replays them into SQLite; SchemaCheck compares a store with that table).
        .executableTarget(name: "MigrationEmbedder", dependencies: ["CSQLite"], path: "Sources/MigrationEmbedder"),
        .plugin(
            name: "EmbedMigrations", capability: .buildTool(),
            dependencies: ["MigrationEmbedder"], path: "Plugins/EmbedMigrations"),

        .target(
            name: "TokenStore",
            dependencies: ["CSQLite", "CLibSecret", "CSodium", "CTSS2", "CGlibcExtensions", "CGIO"],
            plugins: ["EmbedMigrations", "EmbedVersion"]),
        .target(name: "AuthSession", dependencies: ["TokenStore", "CSodium", "CCrypto", "CCurl", "CGIO", "CGlibcExtensions"]),
        .executableTarget(
            name: "tokenctl", dependencies: ["TokenStore", "AuthSession", "CGlibcExtensions"],
            linkerSettings: tokenctlLinkerSettings),

        // VERSION compiled into TokenStore as TokenStoreVersion.string.
        .plugin(name: "EmbedVersion", capability: .buildTool(), path: "Plugins/EmbedVersion"),
        // The hand-written C header, imported so `@c @implementation` checks each function against it.
        .systemLibrary(name: "CTokenStore", path: "Sources/CTokenStore"),
        // The C ABI's implementation over the public TokenStore and AuthSession API.
        .target(
            name: "TokenStoreC", dependencies: ["CTokenStore", "TokenStore", "AuthSession"],
            linkerSettings: cABILinkerSettings),
        // `make demo`: a sign-in → use → logout cycle against the local authorization server.
        .executableTarget(name: "tokenstore-demo", dependencies: ["TokenStore", "AuthSession"]),
        // `make bench`: TokenStore against libsecret-per-item and plaintext SQLite.
        .executableTarget(
            name: "tokenbench",
            dependencies: ["TokenStore", "AuthSession", "CSQLite", "CLibSecret", "CSodium", "TestSupport"]),

        // Test-only helpers: child processes, temporary directories, the private keyring, the
        // local authorization server. Never linked into a product (tokenbench, a tool, uses it).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // The `.offPool` / `.cooperativePool` suite traits (they import Testing, which the tools
        // that link TestSupport must not).
        .target(name: "TestTraits", dependencies: ["TestSupport"], path: "Tests/TestTraits"),
        // A child process for crash, multi-process and concurrency tests.
        .executableTarget(
            name: "tokenstore-testchild", dependencies: ["TokenStore", "AuthSession", "TestSupport", "CGlibcExtensions"], path: "Tests/TestChild"),
        // libFuzzer entry points over the decoders (`make fuzz`); without -DFUZZING it replays a corpus.
        .executableTarget(
            name: "tokenstore-fuzz", dependencies: ["TokenStore", "AuthSession"], path: "Tests/Fuzz", exclude: ["Corpus"]),
        // A fault-injecting SQLite VFS (wraps "unix", fails the Nth write, sync or read): tests only.
        .target(name: "CFaultVFS", dependencies: ["CSQLite"], path: "Tests/FaultVFS"),
        .testTarget(name: "TokenStoreTests", dependencies: ["TokenStore", "TestSupport", "TestTraits", "CFaultVFS"]),
        .testTarget(
            name: "AuthSessionTests", dependencies: ["AuthSession", "TokenStore", "TestSupport", "TestTraits", "CCrypto"],
            linkerSettings: [.linkedLibrary("crypto")]),
        .testTarget(name: "tokenctlTests", dependencies: ["TestSupport", "TestTraits"], exclude: ["Golden"]),
    ],
    swiftLanguageModes: [.v6]
)
