#!/usr/bin/env bash
# The whole suite: unit tests, library tests and the integration battery, as the current user
# and (when root) again as an unprivileged user. Ends with "N passed, N failed, N skipped".
#
# Environment:
#   BUILD=dir            where the binaries are (default: build)
#   CORRAL_MUST_WORK=1   a skipped isolation test counts as a failure (set in CI: every layer
#                        is available on the CI machine kind)
#   TESTS=pattern        only run integration tests whose name matches
#   CORRAL_SERIAL_PASSES=1  run the unprivileged pass after the root pass, not beside it
#   CORRAL_SECOND_PASS   internal: set for the unprivileged re-run
# The first pass also runs the MCP tests (test_mcp_*) again with CORRAL_MCP_PREBUILD=2.
# The network namespace: the first pass (root's, or an unprivileged caller's only one) makes
# every sandbox's with the init's helper (CORRAL_TEST_NET_HELPER=always, DESIGN §2 step 2c);
# root's second pass, as uid 65534, leaves it to the library (the helper only while a CPU is
# idle), so the whole battery runs on both paths.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# An interrupted or failed runner leaves nothing behind: its scratch directories, the
# running test's workspace, python3's directory, and the second pass (stop_second_pass,
# which takes down that pass's process group; that pass cleans up its own the same way).
PY_DIR= SCRATCH= LT_WS= CUR_WS= P2_PID= P2= OUT=
cleanup_runner() {
	stop_second_pass
	[ -z "$CUR_WS" ] || rm -rf "$CUR_WS" "$CUR_WS.log"
	[ -z "$LT_WS" ] || rm -rf "$LT_WS"
	[ -z "$SCRATCH" ] || rm -rf "$SCRATCH"
	[ -z "$PY_DIR" ] || rm -rf "$PY_DIR"
	CUR_WS= LT_WS= SCRATCH= PY_DIR=
}
trap cleanup_runner EXIT
trap 'cleanup_runner; exit 130' INT
trap 'cleanup_runner; exit 143' TERM
# The tests start python3 thousands of times (JSON reads, canaries, MCP clients). A python3
# that is a version manager's shim (pyenv's is a bash script that runs `pyenv exec`) costs
# 0.3 s at every start on this machine kind when idle and over a second when busy: a
# directory of our own with python3 naming the interpreter the shim resolves to goes first
# in PATH, so the same interpreter starts directly (and nothing else on PATH moves).
if PY_REAL=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$PY_REAL" ] &&
	[ "$(command -v python3)" != "$PY_REAL" ] && PY_DIR=$(mktemp -d /tmp/corral-py.XXXXXX); then
	chmod 0755 "$PY_DIR"
	ln -s "$PY_REAL" "$PY_DIR/python3"
	PATH="$PY_DIR:$PATH"
	export PATH
fi
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
PASSED=0 FAILED=0 SKIPPED=0
FAILED_NAMES=() FAILED_OUT=
WHO=$(id -un 2>/dev/null || id -u)

note() { printf '%s\n' "$*"; }

count_lines() { # count PASS/FAIL/SKIP lines produced by a C test binary
	local out=$1
	local p f s
	p=$(grep -c '^PASS ' <<<"$out")
	f=$(grep -c '^FAIL ' <<<"$out")
	s=$(grep -c '^SKIP ' <<<"$out")
	PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + s))
	grep -E '^(FAIL|SKIP) ' <<<"$out" | sed "s/^/  [$WHO] /"
	while read -r name; do FAILED_NAMES+=("[$WHO] $name"); done < <(grep '^FAIL ' <<<"$out" | cut -d' ' -f2)
}

# Run a C test binary and count its lines. How it ended counts too: a missing binary, a death
# by signal, or a non-zero exit with no FAIL line to explain it is one FAIL named after the
# binary (PASS lines printed before a crash still count: the mains line-buffer stdout).
run_c_tests() { # NAME DIR BINARY [ARG...]
	local tname=$1 dir=$2 bin=$3 out rc why=
	shift 3
	if ! [ -x "$bin" ]; then
		why="binary missing: $bin (build it with make)"
	else
		out=$(cd "$dir" && "$bin" "$@" 2>&1)
		rc=$?
		count_lines "$out"
		if [ "$rc" -gt 128 ]; then
			why="killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?')) after $(grep -c '^PASS ' <<<"$out") PASS line(s)"
		elif [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
			why="exit status $rc with no FAIL line; last output: $(tail -1 <<<"$out")"
		elif [ "$rc" -eq 0 ] && ! grep -q '^PASS ' <<<"$out"; then
			why="printed no PASS line"
		fi
	fi
	if [ -n "$why" ]; then
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("[$WHO] $tname")
		echo "  [$WHO] FAIL $tname: $why"
	fi
}

if [ -z "${CORRAL_SECOND_PASS:-}" ]; then
	note "== unit tests"
	run_c_tests unit_tests . "$BUILD/tests/unit_tests"
fi

# When root, the same suite runs again as an unprivileged user (uid 65534), on its own copy
# of the binaries and tests, in its own scratch directories and audit store. It runs
# concurrently with this pass (about 18 minutes for both on the 2-core CI machine, against 25
# one after the other) unless CORRAL_SERIAL_PASSES is set; its output is printed when it ends.
# It takes its tests in the reverse order, so the two passes do not run the same test, with
# the same load, at the same time. What they share, and how the tests keep apart: the
# process table (every marker a test looks for with pgrep is random, or a port the kernel
# picked), host loopback (canary listeners take ports the kernel picks), the cgroup tree
# (only root makes cgroups here, and the escape battery's evidence counts only cgroups its
# own user made), /tmp (every test's files are under mktemp names) and the CPUs (the time
# bounds tests assert are many times what a run takes). Its own session and process group:
# an interrupted or failed runner takes it down (stop_second_pass, from cleanup_runner).
start_second_pass() {
	OUT=$(mktemp /tmp/corral-pass2.XXXXXX)
	chmod 0666 "$OUT"
	# The build dir may sit under a private home; the second pass gets its own copy.
	P2=$(mktemp -d /tmp/corral-p2.XXXXXX)
	mkdir -p "$P2/build/tests"
	cp "$BUILD/corral" "$P2/build/"
	cp "$BUILD/tests/probe" "$BUILD/tests/lib_tests" "$BUILD/tests/nolayer" \
		"$BUILD/tests/audit_tool" "$BUILD/tests/session_tool" "$P2/build/tests/"
	cp -r "$ROOT/tests" "$ROOT/docs" "$P2/"
	chmod -R a+rX "$P2"
	(cd /tmp && exec setsid setpriv --reuid=65534 --regid=65534 --clear-groups \
		env -i PATH=/usr/bin:/bin HOME=/tmp CORRAL_SECOND_PASS=1 BUILD="$P2/build" \
		CORRAL_MUST_WORK="${CORRAL_MUST_WORK:-}" TESTS="${TESTS:-}" \
		CORRAL_SANITIZED="${CORRAL_SANITIZED:-}" \
		bash "$P2/tests/run.sh") >"$OUT" 2>&1 </dev/null &
	P2_PID=$!
}
# The runner ends before the second pass: end it too (setsid made it its process group's
# leader, so the group is its pid; background jobs of a script ignore SIGINT, hence TERM).
stop_second_pass() {
	if [ -n "$P2_PID" ]; then
		kill -TERM -- "-$P2_PID" "$P2_PID" 2>/dev/null
		wait "$P2_PID" 2>/dev/null
	fi
	[ -z "$P2" ] || rm -rf "$P2"
	[ -z "$OUT" ] || rm -f "$OUT"
	P2_PID= P2= OUT=
}
finish_second_pass() {
	local rc=0 last p f s
	wait "$P2_PID" || rc=$?
	P2_PID=
	note "== second pass as an unprivileged user (uid 65534)${CORRAL_SERIAL_PASSES:+, after the first}"
	grep -v '^[0-9]* passed' "$OUT"
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT" | tail -1)
	if [ -z "$last" ]; then
		echo "  [nobody] the unprivileged pass did not finish (exit status $rc)"
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("[nobody] the whole pass (it did not finish: exit status $rc)")
	else
		p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$last")
		f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$last")
		s=$(sed -nE 's/.*, ([0-9]+) skipped.*/\1/p' <<<"$last")
		PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + ${s:-0}))
		# its failures join this pass's list and outputs, which the run ends with
		while read -r name; do FAILED_NAMES+=("$name"); done < <(grep -E '^  \[[^]]*\] FAIL ' "$OUT" | sed -E 's/^  (\[[^]]*\]) FAIL ([^ :]*).*/\1 \2/')
		FAILED_OUT+=$(awk '/^  \[[^]]*\] FAIL / { on = 1; print; next } on && /^      / { print; next } { on = 0 }' "$OUT")
	fi
	rm -rf "$P2" "$OUT"
	P2= OUT=
}
if [ -z "${CORRAL_SECOND_PASS:-}" ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
	[ -z "${CORRAL_SERIAL_PASSES:-}" ]; then
	start_second_pass
fi

# Everything the integration tests run must be reachable by an unprivileged user too, so
# copy the binaries into a world-readable scratch directory.
SCRATCH=$(mktemp -d /tmp/corral-tests.XXXXXX)
chmod 0755 "$SCRATCH"
mkdir -p "$SCRATCH/bin"
cp "$BUILD/corral" "$BUILD/tests/probe" "$BUILD/tests/lib_tests" "$BUILD/tests/nolayer" \
	"$BUILD/tests/audit_tool" "$BUILD/tests/session_tool" "$SCRATCH/bin/"
cp -r "$ROOT/tests" "$SCRATCH/tests"
cp -r "$ROOT/docs" "$SCRATCH/docs"
chmod -R a+rX "$SCRATCH"
export CORRAL="$SCRATCH/bin/corral" PROBE="$SCRATCH/bin/probe" NOLAYER="$SCRATCH/bin/nolayer"
export LIBTESTS="$SCRATCH/bin/lib_tests" TESTDIR="$SCRATCH/tests" DOCS="$SCRATCH/docs"
# Runs record into an audit store: a scratch one, not the user's real store.
mkdir -p "$SCRATCH/state"
chmod 0777 "$SCRATCH/state"
export XDG_STATE_HOME="$SCRATCH/state"
[ -n "${CORRAL_SECOND_PASS:-}" ] || export CORRAL_TEST_NET_HELPER="${CORRAL_TEST_NET_HELPER:-always}"

note "== library tests ($WHO)"
LT_WS=$(mktemp -d /tmp/corral-lt.XXXXXX)
run_c_tests lib_tests "$LT_WS" "$LIBTESTS" "$LT_WS"
rm -rf "$LT_WS"
LT_WS=

note "== integration and escape tests ($WHO)"
source "$ROOT/tests/lib.sh"
for f in "$ROOT"/tests/integration/*.sh "$ROOT"/tests/escape/*.sh; do
	# a test file that does not even parse must not pass by defining no tests
	if [ -f "$f" ] && ! bash -n "$f"; then
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("[$WHO] $f")
		echo "  [$WHO] FAIL $f does not parse"
	fi
	[ -f "$f" ] && source "$f"
done
# Each test's duration goes here; the pass ends with its total and the slowest ones.
TEST_TIMES="$SCRATCH/times"
: >"$TEST_TIMES"
# Each test's bash sources the suite as one file of definitions (write_prelude, lib.sh).
export CORRAL_PRELUDE="$SCRATCH/prelude.sh"
if ! write_prelude "$CORRAL_PRELUDE" "$ROOT"; then
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("[$WHO] prelude")
	echo "  [$WHO] FAIL the suite's prelude could not be written; every test sources the files"
	unset CORRAL_PRELUDE
fi
ORDER=
[ -z "${CORRAL_SECOND_PASS:-}" ] || ORDER=-r # see start_second_pass
for t in $(declare -F | awk '{print $3}' | grep '^test_' | sort $ORDER); do
	if [ -n "${TESTS:-}" ] && ! [[ $t == *${TESTS}* ]]; then continue; fi
	run_one "$t"
done

# The fast path (issue 9): the MCP server's tests again, with every server keeping two
# sandboxes built ahead (CORRAL_MCP_PREBUILD is the default of --prebuild). The escape
# battery has its own door for it (test_escape_mcppre_*, which must be served prebuilt).
if [ -z "${CORRAL_SECOND_PASS:-}" ]; then
	note "== MCP tests with --prebuild 2 ($WHO)"
	WHO0=$WHO WHO="$WHO, prebuild"
	export CORRAL_MCP_PREBUILD=2
	for t in $(declare -F | awk '{print $3}' | grep '^test_mcp_' | sort); do
		if [ -n "${TESTS:-}" ] && ! [[ $t == *${TESTS}* ]]; then continue; fi
		run_one "$t"
	done
	unset CORRAL_MCP_PREBUILD
	WHO=$WHO0
fi

if [ -s "$TEST_TIMES" ]; then
	note "== integration and escape tests ($WHO): $(wc -l <"$TEST_TIMES") runs in $(awk '{ s += $1 } END { printf "%.0f", s }' "$TEST_TIMES") s; the slowest:"
	sort -rn "$TEST_TIMES" | head -8 | sed 's/^/     /; s/ test_/ s  test_/'
fi
rm -rf "$SCRATCH"
SCRATCH=

if [ -n "$P2_PID" ]; then
	finish_second_pass
elif [ -z "${CORRAL_SECOND_PASS:-}" ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	start_second_pass
	finish_second_pass
fi

if [ -n "${CORRAL_MUST_WORK:-}" ] && [ "$SKIPPED" -gt 0 ] && [ -z "${CORRAL_SECOND_PASS:-}" ]; then
	echo "CORRAL_MUST_WORK is set: $SKIPPED skipped test(s) count as failures"
	FAILED=$((FAILED + SKIPPED))
	SKIPPED=0
fi
cleanup_runner
if [ ${#FAILED_NAMES[@]} -gt 0 ] && [ -z "${CORRAL_SECOND_PASS:-}" ]; then
	echo "== the failures again (a CI log is often read from its tail)"
	[ -z "$FAILED_OUT" ] || printf '%s\n' "$FAILED_OUT" | head -150
	echo "failed: ${#FAILED_NAMES[@]}"
	printf '  %s\n' "${FAILED_NAMES[@]}"
fi
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
