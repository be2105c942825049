# Helpers for the integration battery. Each test_* function runs in a subshell with its own
# workspace in $WS; it fails by calling fail (or returning non-zero) and skips with skip.
# Sandbox claims are judged by host-side evidence: canary files, listeners, surviving pids.

TEST_TIMEOUT=${TEST_TIMEOUT:-60}

fail() { echo "    $*" >&2; exit 1; }
skip() { echo "SKIP_REASON: $*" >&2; exit 77; }
assert_eq() { [ "$1" = "$2" ] || fail "expected '$2', got '$1'${3:+ ($3)}"; }
assert_contains() { [[ $1 == *"$2"* ]] || fail "expected to contain '$2', got: ${1:0:400}"; }
assert_not_contains() { [[ $1 != *"$2"* ]] || fail "must not contain '$2', got: ${1:0:400}"; }
is_root() { [ "$(id -u)" = 0 ]; }

# corral run in the test workspace. corral_via runs a `corral run` command line as it is, or,
# with CORRAL_VIA=mcp, the same run through `corral mcp` (tests/escape/via_mcp.py), or, with
# CORRAL_VIA=mcp-prebuilt, through `corral mcp --prebuild 1` in a sandbox built ahead of the
# call (the fast path; via_mcp.py fails a call that did not get one): one test body then
# checks every front door.
via_mcp_door() { [[ ${CORRAL_VIA:-cli} == mcp* ]]; }
corral_via() {
	if via_mcp_door; then
		VIA_MCP_PREBUILT=$([ "$CORRAL_VIA" = mcp-prebuilt ] && echo 1) \
			python3 "$TESTDIR/escape/via_mcp.py" "$@"
	else
		"$@"
	fi
}
cr() { corral_via "$CORRAL" run -w "$WS" "$@"; }
# JSON field of a result (needs python3 only as a JSON reader on the host)
jget() { python3 -c 'import json,sys
d=json.loads(sys.stdin.read())
for k in sys.argv[1].split("."):
    d = d[k] if not isinstance(d, list) else d[int(k)]
print(json.dumps(d) if isinstance(d,(dict,list,bool)) or d is None else d)' "$1"; }

# Wait until no process whose command line contains MARK exists; fail if one survives.
assert_no_survivor() {
	local mark=$1 i
	for i in $(seq 1 50); do
		pgrep -f -- "$mark" >/dev/null || return 0
		sleep 0.1
	done
	fail "a process with '$mark' survived: $(pgrep -af -- "$mark" | head -3)"
}

# A TCP listener on 127.0.0.1 that counts connections into a file; prints its port.
start_tcp_canary() {
	local out=$1
	python3 - "$out" <<'PY' &
import socket, sys, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + ".port", "w").write(str(s.getsockname()[1]))
n = 0
open(sys.argv[1], "w").write("0")
s.settimeout(30)
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    n += 1
    open(sys.argv[1], "w").write(str(n))
    c.close()
PY
	CANARY_PID=$!
	for _ in $(seq 1 50); do [ -s "$out.port" ] && break; sleep 0.05; done
	cat "$out.port"
}

# An abstract unix socket listener, same protocol.
start_abstract_canary() {
	local name=$1 out=$2
	python3 - "$name" "$out" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1]); s.listen(16)
n = 0
open(sys.argv[2], "w").write("0")
open(sys.argv[2] + ".ready", "w").write("1")
s.settimeout(30)
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    n += 1
    open(sys.argv[2], "w").write(str(n))
    c.close()
PY
	CANARY_PID=$!
	for _ in $(seq 1 50); do [ -s "$out.ready" ] && break; sleep 0.05; done
}

# The whole suite (lib.sh, every test file, the escape cases registered for each door) as one
# file of plain definitions: every function (declare -f) and every top-level variable the
# files set (declare -p). A test runs in a fresh bash, which sources this instead of the
# files themselves: sourcing those runs esc_register once per escape file, which forks awk,
# grep and sed for every case, and cost 0.74 s of every test on this machine kind when idle
# (2.2 s when busy); the prelude takes 0.04 s (0.15 s). Written once per pass by
# tests/run.sh, in a bash of its own, so that none of the runner's variables goes in.
write_prelude() { # OUT ROOT
	ROOT=$2 bash -c '
		set -u
		# every variable by name, declared-only ones too ("declare -A SES_IN" has no value,
		# and compgen -v leaves it out)
		prelude_names() { declare -p | sed -n "s/^declare -[^ ]* \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p"; }
		# what each variable was before the files: one they set (new, or changed from the
		# environment) goes into the prelude; bash keeps its own ones changing by themselves
		declare -A prelude_was
		for prelude_v in $(prelude_names); do
			prelude_was[$prelude_v]=$(declare -p "$prelude_v" 2>/dev/null)
		done
		source "$ROOT/tests/lib.sh" || exit 1
		for f in "$ROOT"/tests/integration/*.sh "$ROOT"/tests/escape/*.sh; do
			[ -f "$f" ] && { source "$f" || exit 1; }
		done
		unset f
		for prelude_v in $(prelude_names); do
			case $prelude_v in
			prelude_* | BASH* | FUNCNAME | RANDOM | SRANDOM | SECONDS | EPOCH* | LINENO | \
				PIPESTATUS | _ | HISTCMD | PWD | OLDPWD | SHLVL | COLUMNS | LINES) continue ;;
			esac
			prelude_now=$(declare -p "$prelude_v" 2>/dev/null) || continue
			[ "${prelude_was[$prelude_v]-}" = "$prelude_now" ] || printf "%s\n" "$prelude_now"
		done
		unset -f prelude_names
		declare -f
	' >"$1" && chmod a+r "$1" || return 1
	# The proof: a bash that sourced the prelude holds the same variables (with their
	# attributes) and functions as one that sourced the files, but for bash's own.
	local state='declare -p | grep -avE "^declare -[^ ]* (BASH|FUNCNAME|RANDOM|SRANDOM|SECONDS|EPOCH|LINENO|PIPESTATUS|_=|HISTCMD|PWD|OLDPWD|SHLVL|COLUMNS|LINES|PPID|prelude_|f=)"; declare -f'
	if ! cmp -s <(ROOT=$2 bash -c 'source "$ROOT/tests/lib.sh"
		for f in "$ROOT"/tests/integration/*.sh "$ROOT"/tests/escape/*.sh; do source "$f"; done
		unset f; '"$state") <(ROOT=$2 bash -c 'source "$0"; '"$state" "$1"); then
		echo "write_prelude: $1 does not reproduce the suite's variables and functions" >&2
		return 1
	fi
}

# What a test's fresh bash runs first to have the suite: the prelude when the runner wrote
# one, else every file.
suite_source_cmd() {
	if [ -n "${CORRAL_PRELUDE:-}" ] && [ -r "$CORRAL_PRELUDE" ]; then
		printf "source '%s'" "$CORRAL_PRELUDE"
	else
		local r=${TESTDIR:-$ROOT/tests}
		printf "source '%s/lib.sh'; for f in '%s'/integration/*.sh '%s'/escape/*.sh; do [ -f \"\$f\" ] && source \"\$f\"; done" "$r" "$r" "$r"
	fi
}

run_one() {
	local t=$1 rc out
	local ws
	ws=$(mktemp -d /tmp/corral-ws.XXXXXX)
	CUR_WS=$ws # the runner's cleanup removes it if the run is interrupted
	chmod 0755 "$ws"
	local t0=$EPOCHREALTIME
	# The output goes through a file, not a pipe: a process the test leaves behind with its
	# stdout open (outside timeout's process group, or stuck where its signal cannot reach
	# it) would hold a pipe open and stop the whole suite at this test.
	(export WS=$ws; cd "$ws" && timeout -k 10 "$TEST_TIMEOUT" bash -c "set -u; $(suite_source_cmd); $t") >"$ws.log" 2>&1
	rc=$?
	out=$(cat "$ws.log")
	rm -f "$ws.log"
	# how long each test took, for the runner's list of the slowest (TEST_TIMES)
	[ -z "${TEST_TIMES:-}" ] || awk -v a="$t0" -v b="$EPOCHREALTIME" -v t="$t" \
		'BEGIN { printf "%.1f %s\n", b - a, t }' >>"$TEST_TIMES"
	rm -rf "$ws" 2>/dev/null
	CUR_WS=
	if [ $rc -eq 0 ]; then
		PASSED=$((PASSED + 1))
	elif [ $rc -eq 77 ]; then
		SKIPPED=$((SKIPPED + 1))
		echo "  [$WHO] SKIP $t: $(grep SKIP_REASON <<<"$out" | sed 's/SKIP_REASON: //')"
	else
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("[$WHO] $t")
		[ $rc -eq 124 ] && out="$out (test timed out after ${TEST_TIMEOUT}s)"
		out="  [$WHO] FAIL $t
$(sed 's/^/      /' <<<"$out" | tail -15)"
		printf '%s\n' "$out"
		FAILED_OUT+="$out"$'\n' # again at the end of the run (tests/run.sh)
	fi
}
