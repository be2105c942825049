#!/usr/bin/env bash
# Set up corral on Debian 12: install the missing build and test dependencies, build, and run
# a sandboxed demo command. Run as root, or through sudo (then the build and the demo run as
# the calling user, so that `make check` works without root afterwards). Idempotent: packages
# already installed are left alone and apt is not touched when nothing is missing.
#
#   sudo ./scripts/setup.sh
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

LOG=$(mktemp /tmp/corral-setup.XXXXXX)
trap 'rm -f "$LOG"' EXIT
# Run a command quietly; on failure show the end of its output.
quiet() {
	if ! "$@" >"$LOG" 2>&1; then
		tail -n 30 "$LOG" >&2
		die "failed: $*"
	fi
}

[ "$(id -u)" = 0 ] || die "run this as root: sudo $0"

# Build and run the demo as the user who called sudo, if any, so the build tree is theirs.
BUILD_USER=root
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && id "$SUDO_USER" >/dev/null 2>&1; then
	BUILD_USER=$SUDO_USER
fi
as_user() {
	if [ "$BUILD_USER" = root ]; then
		"$@"
	else
		runuser -u "$BUILD_USER" -- "$@"
	fi
}

# ---- packages -------------------------------------------------------------------------
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
	die "this script needs apt and dpkg (Debian 12); install by hand: a C compiler, make, pkg-config, libseccomp-dev, libjansson-dev, libsqlite3-dev, nettle-dev"
fi

# Build: build-essential, or at least its parts that corral needs.
WANT=()
if ! installed build-essential; then
	WANT+=(gcc make libc6-dev)
fi
WANT+=(pkg-config libseccomp-dev libjansson-dev libsqlite3-dev nettle-dev)
# Tests: JSON schema validation, pgrep, setpriv (the unprivileged pass), ip, the ASan build,
# git (the protected .git tests run the host's git on the workspace).
WANT+=(python3 python3-jsonschema procps util-linux iproute2 clang libclang-rt-14-dev sqlite3 valgrind man-db git)

MISSING=()
for p in "${WANT[@]}"; do
	installed "$p" || MISSING+=("$p")
done
# Node.js and npm (the end-to-end test with the official MCP SDK) are wanted as commands: a
# host with Node.js from elsewhere (NodeSource's nodejs package bundles npm and conflicts
# with Debian's npm) keeps its own, and Debian's packages fill in only what is missing.
command -v node >/dev/null 2>&1 || installed nodejs || MISSING+=(nodejs)
command -v npm >/dev/null 2>&1 || installed npm || MISSING+=(npm)

if [ ${#MISSING[@]} -eq 0 ]; then
	say "all build and test dependencies are installed"
else
	say "installing: ${MISSING[*]}"
	quiet apt-get -q update
	# A package this release does not have (libclang-rt-14-dev outside Debian 12) is
	# skipped with a warning: it only serves `make check-asan`.
	AVAILABLE=()
	for p in "${MISSING[@]}"; do
		if apt-cache show "$p" >/dev/null 2>&1; then
			AVAILABLE+=("$p")
		else
			printf 'setup: warning: package %s is not available here; skipping it\n' "$p" >&2
		fi
	done
	if [ ${#AVAILABLE[@]} -gt 0 ]; then
		quiet apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${AVAILABLE[@]}"
	fi
	say "installed"
fi

# ---- build ----------------------------------------------------------------------------
say "building (make -j2) as $BUILD_USER"
quiet as_user make -j2
[ -x build/corral ] || die "the build did not produce build/corral"
say "built build/corral, build/libcorral.a, build/libcorral.so"

# ---- demo -----------------------------------------------------------------------------
say "demo: a sandboxed shell (hostname, uid and pid are the sandbox's; / is its own root)"
demo_rc=0
# shellcheck disable=SC2016 # expanded inside the sandbox
as_user build/corral run -- sh -c 'echo "hello from $(hostname), uid $(id -u), pid $$"; ls /' ||
	demo_rc=$?

say "corral check: what this host offers"
as_user build/corral check || true

if [ "$demo_rc" -ne 0 ]; then
	# Inside a container or another sandbox some layer may be refused (a fresh /proc is,
	# when the outer one has covered parts): show what the strongest working tier does.
	say "the full sandbox failed here (exit $demo_rc); the same demo with --mode auto:"
	as_user build/corral run --mode auto -- sh -c 'echo "hello from $(hostname), uid $(id -u)"' ||
		die "the demo failed in --mode auto too; see the layers above"
	say "note: --mode required (the default) does not work on this host; see the message above"
fi
say "done; run the test suite with: make check"
