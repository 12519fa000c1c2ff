# TokenStore — the two set-up commands are `make demo` and `make test`.
SWIFT ?= swift
SWIFT_FLAGS ?=

.PHONY: all deps build-deps build api-check test test-providers test-cabi test-gnome demo bench bench-footprint symbol-order soak fuzz sanitizers release stress-tests docs install uninstall clean deb test-deb examples test-gtk test-readme

all: build

# What a build needs: the system packages, and the shim guard (a changed C shim header
# recompiles the Swift modules; SwiftPM would not). `deps` adds the test servers' Python venvs.
build-deps:
	@scripts/install-deps
	@scripts/shim-guard

deps: build-deps
	@scripts/authserver venv
	@scripts/dotserver venv

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

# The whole suite: real SQLite, the real Secret Service (gnome-keyring on a private D-Bus
# session bus) and the real authorization server on loopback.
test: deps
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	# The test authorization server's own checks (OIDC provider, scripted user agent).
	scripts/authserver selftest
	# The fuzz seed corpus replayed through the decoders (the same code libFuzzer drives).
	$$($(SWIFT) build --show-bin-path $(SWIFT_FLAGS))/tokenstore-fuzz
	# The C ABI through an installed prefix: gcc + pkg-config, env -i, ASan, nm -D, browser sign-in, Python, Vala, man, completions.
	SWIFT=$(SWIFT) scripts/with-keyring scripts/test-cabi $(SWIFT_FLAGS)
	# The README's Swift blocks compiled against the package's public API (swiftc on the build's modules).
	SWIFT=$(SWIFT) scripts/test-readme-swift $(SWIFT_FLAGS)
	TOKENSTORE_REQUIRE_KEYRING=1 SWIFT=$(SWIFT) scripts/with-keyring scripts/run-tests $(SWIFT_FLAGS)
# Suites that lock the shared private keyring (or stop its daemon) have "ExclusiveKeyring" in
# their type name: they run in a second, serialized pass so they cannot disturb the others.

# The provider matrix: the key-provider contract tests and the keyring-touching tokenctl tests
# against gnome-keyring, KeePassXC and KWallet, each headless on a private bus with no D-Bus
# activation (scripts/providers/; what each does differently: docs/providers.md).
test-providers: deps
	@scripts/providers/install
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	SWIFT=$(SWIFT) scripts/providers/matrix $(SWIFT_FLAGS)
	# The Flatpak Secret portal: xdg-desktop-portal + gnome-keyring's backend, apps in bubblewrap.
	scripts/providers/install-portal
	scripts/providers/portal

# A sign-in → use → logout cycle in a private keyring session against the local server.
demo: deps
	$(SWIFT) build --product tokenstore-demo $(SWIFT_FLAGS)
	scripts/with-keyring scripts/demo $$($(SWIFT) build --show-bin-path $(SWIFT_FLAGS))/tokenstore-demo

# TokenStore against libsecret-per-item and plaintext SQLite in a private keyring session with the
# local authorization server; rewrites the generated part of BENCHMARKS.md (~10–20 min on 2 cores).
bench: deps
	$(SWIFT) build -c release --product tokenbench $(RELEASE_SWIFT_FLAGS) $(SWIFT_FLAGS) $(call release_link,all)
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" scripts/bench
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" scripts/with-keyring scripts/bench-footprint --output BENCHMARKS.md
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" scripts/with-keyring scripts/bench-gnome --output BENCHMARKS.md

# Whole processes side by side (tokenctl vs secret-tool, the C ABI vs libsecret, the Python
# binding vs keyring, the library's size); ~2 min. Part of `make bench`.
bench-footprint: deps
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" scripts/with-keyring scripts/bench-footprint --output BENCHMARKS.md

# scripts/linker/symbol-order.txt (the functions the everyday commands run, placed first by the
# release link) from callgrind runs; needs valgrind. Rerun after large changes (~2 min).
symbol-order: deps
	SWIFT="$(SWIFT)" scripts/with-keyring scripts/symbol-order

# libFuzzer + ASan over the decoders (Tests/Fuzz), FUZZ_SECONDS per target (CI: 60).
FUZZ_SECONDS ?= 60
fuzz: deps
	scripts/fuzz $(FUZZ_SECONDS)

# The suite under --sanitize=address and --sanitize=thread (and undefined, which this toolchain
# reports unsupported), each in its own scratch path.
sanitizers: deps
	scripts/sanitizers address undefined thread

# Soak sizes, outside CI (hours): crash_kill9 10,000, malformed_db 100,000, multiprocess
# 16 processes × 10 min, 10,000 races, 100 crash repeats, every crash_every_syscall point,
# 30 min of fuzzing per target.
soak: deps
	scripts/soak 1800

# The tokenctl and reliability suites N times back to back as CI runs them (CI=true, no stdin),
# each run under the watchdog: counts runs, failures, hangs and the slowest test. Not in CI.
N ?= 20
stress-tests: deps
	SWIFT=$(SWIFT) scripts/stress-tests $(N)

# The DocC archive of the TokenStore module (.build/docs); fails on a broken symbol link.
docs: deps
	SWIFT=$(SWIFT) scripts/docs

# The release link's flags for this build machine (lld, DT_RELR, the symbol ordering; nothing
# where glibc is older than 2.36 or there is no lld): scripts/release-link PRODUCT.
release_link = $(shell SWIFT="$(SWIFT)" scripts/release-link $(1))

# Release build with warnings as errors (CI runs this too), linked as `make install` links, and
# the check that scripts/linker/symbol-order.txt still names the code it orders.
# RELEASE_SWIFT_FLAGS: the flags of every release build (make release, make install, make deb),
# so that each reuses the others' compiled modules (a different flag recompiles everything).
RELEASE_SWIFT_FLAGS ?= -Xswiftc -warnings-as-errors
release: build-deps
	$(SWIFT) build -c release $(RELEASE_SWIFT_FLAGS) $(SWIFT_FLAGS) $(call release_link,all)
	scripts/check-symbol-order "$$($(SWIFT) build -c release --show-bin-path $(RELEASE_SWIFT_FLAGS) $(SWIFT_FLAGS))"

# The public Swift API against the last release's (api/X.Y.Z): a break not listed with its reason in
# api/accepted-breaks.txt fails (swift-api-digester over the release build's modules; seconds once built).
api-check: release
	SWIFT=$(SWIFT) scripts/api-check

# The C ABI alone (debug build, a temporary prefix; about 30 s once built).
test-cabi: deps
	SWIFT=$(SWIFT) scripts/with-keyring scripts/test-cabi $(SWIFT_FLAGS)

# libtokenstore-gobject (gobject/) in C on a GMainLoop, GJS, Python (PyGObject) and Vala: sign-in,
# token, logout, a cancelled sign-in and another process's logout as a signal, against the
# test server answering after 500 ms; its GIR, typelib, vapi and gi-docgen docs (~1 min once built).
test-gnome: deps
	SWIFT=$(SWIFT) scripts/with-keyring scripts/test-gnome $(SWIFT_FLAGS)

# libtokenstore.so.1 (+ symlinks), tokenstore.h, tokenstore.pc, tokenctl, its man page and
# bash/zsh/fish completions under $(DESTDIR)$(PREFIX). CONFIG=debug installs the debug build
# unstripped (the tests do); the default is a stripped release build, linked with the flags of
# scripts/release-link (the debug build with the toolchain's default linker). Neither has a
# RUNPATH: Package.swift links the library without one (scripts/linker/no-rpath), tokenctl is
# built with --disable-local-rpath; $ORIGIN would let a library placed next to them be loaded
# instead of the system's (the lazy dlopen of libcurl.so.4 and libcrypto.so.3 included).
# `sudo make install` builds (and runs the fresh tokenctl for its man page) as the sudo caller,
# or as the tree's owner, never as root for a tree root does not own, and installs as root
# (scripts/install build, then scripts/install install, which only copies). LIBDIR (default
# lib/<multiarch> under /usr and /usr/local), PYTHON, PYTHON_SITE (default: where PYTHON looks)
# and LDCONFIG: see scripts/install. A private PREFIX prints the environment lines it needs.
PREFIX ?= /usr/local
DESTDIR ?=
CONFIG ?= release
STRIP ?= strip --strip-unneeded
LIBDIR ?=
PYTHON ?=
PYTHON_SITE ?=
INSTALL_ENV = PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" LIBDIR="$(LIBDIR)" PYTHON="$(PYTHON)" PYTHON_SITE="$(PYTHON_SITE)"
install:
	@bin="$$(SWIFT="$(SWIFT)" SWIFT_FLAGS="$(strip $(if $(filter release,$(CONFIG)),$(RELEASE_SWIFT_FLAGS)) $(SWIFT_FLAGS))" \
		CONFIG="$(CONFIG)" scripts/install build)" && \
		$(INSTALL_ENV) STRIP="$(if $(filter release,$(CONFIG)),$(STRIP))" scripts/install install "$$bin"

uninstall:
	$(INSTALL_ENV) scripts/install uninstall

clean:
	rm -rf .build

# Debian packages (debian/, debhelper): libtokenstore1, libtokenstore-dev, tokenctl and
# python3-tokenstore in .build/deb/, from the release build (Swift at /opt/swift), with the flags
# of `make install` (RELEASE_SWIFT_FLAGS), so either reuses the other's build. Only the build's
# dependencies (not the test servers' venvs).
deb: build-deps
	SWIFT_FLAGS="$(strip $(RELEASE_SWIFT_FLAGS) $(SWIFT_FLAGS))" scripts/deb build

# The packages' contents (dpkg-deb), lintian, then installed with apt-get and used: a C
# program through pkg-config with no LD_LIBRARY_PATH, /usr/bin/python3, man -w; purged after.
test-deb: build-deps
	SWIFT_FLAGS="$(strip $(RELEASE_SWIFT_FLAGS) $(SWIFT_FLAGS))" scripts/deb test

# examples/gtk-notes (GTK 4, C) against an installed TokenStore: the system's tokenstore.pc, or
# TOKENSTORE=<a private prefix>. The program goes to $(EXAMPLES_OUT).
TOKENSTORE ?=
EXAMPLES_OUT ?= $(CURDIR)/.build/examples
examples:
	$(MAKE) -C examples/gtk-notes TOKENSTORE="$(TOKENSTORE)" OUT="$(EXAMPLES_OUT)"

# gtk-notes under Xvfb, driven with xdotool through sign-in, an API call and logout against the
# local authorization server with the scripted browser; screenshots to docs/images/ (~1 min).
test-gtk: deps
	SWIFT=$(SWIFT) scripts/with-keyring scripts/test-gtk $(SWIFT_FLAGS)

# The README's ```swift blocks compiled against the package (part of `make test`).
test-readme: deps
	SWIFT=$(SWIFT) scripts/test-readme-swift $(SWIFT_FLAGS)
