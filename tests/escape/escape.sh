# The escape and abuse battery: shared helpers, the isolation record, and the two front doors.
#
# Groups: escape_fs.sh (filesystem), escape_net.sh (network), escape_kernel.sh (kernel attack
# surface), escape_res.sh (resource exhaustion), escape_sup.sh (supervisor and I/O robustness),
# escape_env.sh (environment and secret leakage), escape_fallback.sh (the same claims with a
# layer really missing). Every claim is judged by host-side evidence (a canary file's hash, a
# listener's connection count, surviving pids, the supervisor alive and reporting), and where
# it is safe a control run with --mode none or --net host shows that the same check does fail
# without the layer.
#
# Safety: were isolation broken, these commands would run on the host. They only ever write to
# canaries of their own or create uniquely named paths (removed at exit); existing system files
# are only opened for writing (O_APPEND, no data), never written; sysctl writes use the current
# value.
#
# Two front doors. A case is written once, as escape_case_<group>_<name>, and runs twice:
# test_escape_cli_<group>_<name> through `corral run`, test_escape_mcp_<group>_<name> through
# `corral mcp` (tests/escape/via_mcp.py makes one tools/call and prints and exits like the CLI).
# Runs go through cr (tests/lib.sh) or corral_via, which pick the door from CORRAL_VIA. A case
# about one door only (SIGKILL of the CLI supervisor, a pty as stdin, `corral check`; SIGKILL of
# the server, a client that disconnects) is defined directly as test_escape_cli_* or
# test_escape_mcp_* and says why.

ESC_CLEANUP=()

# Run at test exit, last registered first (the test runs in its own bash; fail() exits it).
esc_on_exit() {
	local i
	for ((i = ${#ESC_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${ESC_CLEANUP[i]}" >/dev/null 2>&1
	done
}
esc_defer() {
	if [ ${#ESC_CLEANUP[@]} -eq 0 ]; then
		trap esc_on_exit EXIT
		trap 'exit 143' TERM INT HUP # the runner's timeout: still clean up
	fi
	ESC_CLEANUP+=("$*")
}

# Host paths a broken sandbox could create: removed at exit whatever happens (files with rm -f,
# directories with rmdir, so nothing but what the test named can go).
esc_defer_host_paths() {
	local p
	for p in "$@"; do
		esc_defer "[ -d '$p' ] && [ ! -L '$p' ] && rmdir '$p'; [ -f '$p' ] && rm -f '$p'"
	done
}

# A unique marker for pgrep, never part of this test's own command line.
esc_mark() { echo "corraliso$RANDOM$RANDOM$RANDOM"; }

# The probe inside the workspace (the sandbox sees only the workspace, not the build dir).
esc_probe() { cp "$PROBE" "$WS/probe"; }

# A canary directory outside the workspace, in the host's /tmp: ESC_C, with ESC_CANARY a
# world-writable file holding ESC_SECRET (so only isolation, not permissions, protects it).
esc_canary() {
	ESC_C=$(mktemp -d /tmp/corral-iso-canary.XXXXXX)
	chmod 0777 "$ESC_C"
	esc_defer "rm -rf '$ESC_C'"
	ESC_SECRET="iso-secret-$RANDOM$RANDOM"
	ESC_CANARY="$ESC_C/canary"
	echo "$ESC_SECRET" >"$ESC_CANARY"
	chmod 0666 "$ESC_CANARY"
	ESC_CANARY_HASH=$(esc_hash "$ESC_CANARY")
}

# How many "errno=" answers of the probe are in OUT (stderr merged into it may share a line).
esc_nerr() { grep -o 'errno=[A-Z0-9]*' <<<"$1" | wc -l; }

esc_hash() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
assert_canary_unchanged() {
	[ -f "$ESC_CANARY" ] || fail "the host canary $ESC_CANARY was removed${1:+ ($1)}"
	[ "$(esc_hash "$ESC_CANARY")" = "$ESC_CANARY_HASH" ] ||
		fail "the host canary changed${1:+ ($1)}: $(head -c 200 "$ESC_CANARY")"
}

# A host listener counting connections (tcp, unix) or datagrams (udp) into OUT; for tcp/udp
# the port is in OUT.port. ADDR: an IP for tcp/udp, a path for unix. Killed at test exit.
esc_listen() {
	local kind=$1 addr=$2 out=$3 i
	python3 - "$kind" "$addr" "$out" >/dev/null 2>&1 <<'PY' &
import os, socket, sys
kind, addr, out = sys.argv[1:4]
if kind == "unix":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(addr)
    os.chmod(addr, 0o777)
    s.listen(16)
elif kind == "tcp":
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 0))
    s.listen(16)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 0))
open(out, "w").write("0")
if kind != "unix":
    open(out + ".port", "w").write(str(s.getsockname()[1]))
open(out + ".ready", "w").write("1")
s.settimeout(30)
n = 0
while True:
    try:
        if kind == "udp":
            s.recvfrom(65536)
        else:
            c, _ = s.accept()
            c.close()
    except socket.timeout:
        break
    n += 1
    open(out, "w").write(str(n))
PY
	esc_defer "kill $!"
	for i in $(seq 1 150); do
		[ -s "$out.ready" ] && return 0
		sleep 0.02
	done
	fail "the $kind listener on $addr did not start"
}

# The lib.sh canaries, with their output detached (a background process holding the test's
# stdout would keep the runner waiting) and killed at test exit.
esc_tcp_canary() { # OUT -> ESC_PORT
	start_tcp_canary "$1" >/dev/null 2>&1
	esc_defer "kill $CANARY_PID"
	ESC_PORT=$(cat "$1.port")
	local i
	for i in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.02; done
}
esc_abstract_canary() { # NAME OUT
	start_abstract_canary "$1" "$2" >/dev/null 2>&1
	esc_defer "kill $CANARY_PID"
}

# The count a listener wrote, after a moment for pending accepts to be counted.
esc_count() {
	local v i
	sleep 0.2
	for i in $(seq 1 20); do
		v=$(cat "$1" 2>/dev/null)
		[ -n "$v" ] && { echo "$v"; return; }
		sleep 0.02
	done
	echo "?"
}

# A host process with a unique name (a copy of sleep in the canary dir); sets ESC_HOST_PID.
esc_host_sleeper() { # MARK SECONDS
	cp /bin/sleep "$ESC_C/$1"
	"$ESC_C/$1" "$2" >/dev/null 2>&1 &
	ESC_HOST_PID=$!
	esc_defer "kill -9 $ESC_HOST_PID"
}

# Start corral in the background, its JSON result into OUT, the sandbox seeing its
# supervisor's host pid as $SUP. ESC_PRE (an array, e.g. ("$NOLAYER" userns --)) may wrap it:
# exec keeps the pid. Sets ESC_SUP (the supervisor: `corral run`, or the `corral mcp` server)
# and ESC_BG (the process to wait for: the same, or the MCP client driving the server).
ESC_PRE=()
esc_bg_corral() { # OUT RUN-ARGS...
	local out=$1 i
	shift
	if [ "${CORRAL_VIA:-cli}" = mcp ]; then
		VIA_MCP_SERVER_PID_ENV=SUP VIA_MCP_PIDFILE="$out.pid" python3 "$TESTDIR/escape/via_mcp.py" \
			"${ESC_PRE[@]}" "$CORRAL" run -w "$WS" --json "$@" >"$out" 2>"$out.err" &
		ESC_BG=$!
		esc_defer "kill -9 $ESC_BG"
		for i in $(seq 1 100); do [ -s "$out.pid" ] && break; sleep 0.02; done
		ESC_SUP=$(cat "$out.pid" 2>/dev/null) || fail "the MCP server did not start"
		esc_defer "kill -9 $ESC_SUP"
		return
	fi
	bash -c 'ws=$1 c=$2 n=$3; shift 3; pre=("${@:1:n}"); shift "$n"
		exec "${pre[@]}" "$c" run -w "$ws" --json --env SUP=$$ "$@"' \
		_ "$WS" "$CORRAL" "${#ESC_PRE[@]}" "${ESC_PRE[@]}" "$@" >"$out" 2>"$out.err" &
	ESC_SUP=$!
	ESC_BG=$!
	esc_defer "kill -9 $ESC_SUP"
}

# Register the cases defined so far for both front doors: escape_case_X becomes
# test_escape_cli_X and test_escape_mcp_X. Called at the end of every escape_*.sh file (each
# call registers everything sourced before it, so the order of sourcing does not matter).
esc_register() {
	local c n
	for c in $(declare -F | awk '{print $3}' | grep '^escape_case_'); do
		n=${c#escape_case_}
		eval "test_escape_cli_$n() { export CORRAL_VIA=cli; $c; }"
		eval "test_escape_mcp_$n() { export CORRAL_VIA=mcp; $c; }"
	done
}

# Wait until a pid is gone (at most N tenths of a second).
esc_wait_pid() {
	local i
	for i in $(seq 1 "${2:-100}"); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# The layers `corral check` says this host offers; with CORRAL_MUST_WORK every one must be.
ESC_LAYERS="userns mountns pidns netns ipcns utsns cgroupns landlock seccomp caps"

# ---- isolation record ----------------------------------------------------------------------

escape_case_record_default_all_layers_applied() {
	esc_probe
	local out l
	out=$(cr --json -- ./probe hostname)
	assert_eq "$(jget exit_code <<<"$out")" 0 "$(jget error <<<"$out")"
	assert_eq "$(jget mode <<<"$out")" required
	for l in $ESC_LAYERS; do
		assert_eq "$(jget "isolation.$l.applied" <<<"$out")" true "isolation.$l.applied"
	done
	local ll
	ll=$(jget isolation.landlock.detail <<<"$out")
	[[ $ll =~ ^abi\ [1-9][0-9]* ]] || fail "landlock detail '$ll' does not name the ABI"
	assert_contains "$(jget isolation.netns.detail <<<"$out")" loopback
	# the utsns claim, observed: the sandbox's hostname is corral, not the host's
	assert_eq "$(jget stdout <<<"$out")" corral
	[ "$(hostname)" != corral ] || fail "the host itself is called corral: the check proves nothing"
}

# Each namespace the record claims is a different one from the host's: compare the namespace
# ids the kernel shows inside with the test's own. Control: --mode none shares all of them.
escape_case_record_namespaces_differ_from_host() {
	local ns host inside none
	local list="user mnt pid net ipc uts cgroup"
	host=$(for ns in $list; do readlink "/proc/self/ns/$ns"; done)
	inside=$(cr -c "for ns in $list; do readlink /proc/self/ns/\$ns; done")
	none=$(cr --mode none -c "for ns in $list; do readlink /proc/self/ns/\$ns; done")
	[ "$(wc -l <<<"$inside")" -eq 7 ] || fail "could not read the namespace ids inside: $inside"
	assert_eq "$none" "$host" "control: mode none shares the host's namespaces"
	local h i
	for ns in $list; do
		h=$(grep "^$ns:" <<<"$host")
		i=$(grep "^$ns:" <<<"$inside")
		[ "$h" != "$i" ] || fail "the sandbox shares the host's $ns namespace ($i)"
	done
}

# "caps applied" in the record means what the kernel shows: every set empty. Checked in the
# default run, the no-namespace tier and mode none, for root and for an unprivileged user.
escape_case_record_caps_claim_matches_reality() {
	esc_probe
	local out caps applied detail how
	for how in default auto-nouserns none; do
		case $how in
		default) out=$(cr --json -- ./probe caps) ;;
		auto-nouserns) out=$(corral_via "$NOLAYER" userns -- "$CORRAL" run -w "$WS" --mode auto --json -- ./probe caps) ;;
		none) out=$(cr --mode none --json -- ./probe caps) ;;
		esac
		caps=$(jget stdout <<<"$out")
		applied=$(jget isolation.caps.applied <<<"$out")
		detail=$(jget isolation.caps.detail <<<"$out")
		assert_contains "$caps" "CapEff=0000000000000000" # never any effective capability
		if [ "$applied" = true ]; then
			assert_eq "$caps" "CapEff=0000000000000000 CapBnd=0000000000000000 CapPrm=0000000000000000 CapAmb=0000000000000000 CapInh=0000000000000000" \
				"$how: the record says caps applied ($detail)"
		fi
	done
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
