# The escape and abuse battery: shared helpers, the isolation record, and the two front doors.
#
# Groups: escape_fs.sh (filesystem), escape_net.sh (network), escape_kernel.sh (kernel attack
# surface), escape_res.sh (resource exhaustion), escape_sup.sh (supervisor and I/O robustness),
# escape_env.sh (environment and secret leakage), escape_fallback.sh (the same claims with a
# layer really missing). Every claim is judged by host-side evidence (a canary file's hash, a
# listener's connection count, surviving pids, the supervisor alive and reporting), and where
# it is safe a control run with --mode none or --net host shows that the same check does fail
# without the layer. On top of what each case checks, esc_run_case (below) wraps every case
# in the same evidence: a canary file, a TCP and an abstract unix canary listener, no
# survivor, no cgroup left with members.
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

# For a control that expects connections: the count once it reaches N (waiting up to 5 s
# for the listener to accept and write it), after the same moment for any further accepts.
esc_count_at_least() { # FILE N
	local i v
	for i in $(seq 1 100); do
		v=$(cat "$1" 2>/dev/null)
		[ -n "$v" ] && [ "$v" -ge "$2" ] 2>/dev/null && break
		sleep 0.05
	done
	esc_count "$1"
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
	if via_mcp_door; then
		VIA_MCP_PREBUILT=$([ "$CORRAL_VIA" = mcp-prebuilt ] && echo 1) \
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

# ---- host-side evidence around every case -------------------------------------------------
#
# esc_run_case wraps every case of the battery (both doors, and the one-door test_escape_*
# tests), whatever the case itself checks:
#   before: a canary file in the host's /tmp (world-writable, in a world-writable directory,
#           so only isolation protects it) and its sha256; one canary listener process (the
#           probe's canary-listen) with TCP sockets on 127.0.0.1 and ::1 (one free port; ::1
#           where the host has IPv6 loopback, ESC_EV_V6=1) and an abstract unix socket (a
#           unique name); the list of this user's corral-* cgroups.
#   to the case: ESC_EV_FILE (the canary's path), ESC_EV_SECRET (its content), ESC_EV_PORT and
#           ESC_EV_ABSTRACT (the listeners), for cases to aim at. The sandbox learns them only
#           from the command line a case gives it (or --env NAME=VALUE, which both doors pass).
#   after:  the canary's hash is unchanged and nothing new appeared next to it; the listeners
#           accepted 0 connections; nothing the case started is still alive (the test's shell
#           is made a child subreaper, so even a double-forked daemon stays its descendant and
#           is found; a listing that fails is a failed check, never "nothing"); no corral-*
#           cgroup of this user's that the case left behind still has members (found under
#           each hierarchy's mount as /proc/self/mountinfo gives its root, as
#           src/sandbox/cgroup.c does).
# The first failing evidence is named ("host-side evidence: ..."); what the case started and
# left alive is killed either way. Cost: about 30 ms a case (one exec, one static listener).
ESC_EV_DIR=""

# The directories where corral makes its per-run cgroups for this shell: <mount><our
# cgroup>/corral in each hierarchy (v1) and in the unified tree (v2). As src/sandbox/cgroup.c
# finds them: each mount of a hierarchy from /proc/self/mountinfo, whose root (field 4) is
# not "/" where only a subtree is mounted (a container without a cgroup namespace: our path
# /docker/<id>/x is <mount>/x there, or not visible at all).
esc_cgroup_ours() { # -> "CONTROLLERS|DIR" for each hierarchy ("" for v2): our cgroup's dir
	local id ctl path mid par dev root mnt rest fstype src super c ok sub
	local -a own=()
	while IFS=: read -r id ctl path; do
		case $path in /.. | /../*) continue ;; esac # outside our cgroup namespace
		own+=("$ctl:$path")
	done </proc/self/cgroup 2>/dev/null
	while read -r mid par dev root mnt rest; do
		[[ $rest == *" - "* ]] || continue
		read -r fstype src super <<<"${rest#* - }"
		[ "$fstype" = cgroup ] || [ "$fstype" = cgroup2 ] || continue
		root=${root//\\040/ } mnt=${mnt//\\040/ }
		for c in "${own[@]}"; do
			ctl=${c%%:*} path=${c#*:}
			if [ "$fstype" = cgroup2 ]; then
				[ -z "$ctl" ] || continue
			else
				[ -n "$ctl" ] || continue
				ok=1
				for sub in ${ctl//,/ }; do
					[[ ,$super, == *",$sub,"* ]] || ok=""
				done
				[ -n "$ok" ] || continue
			fi
			if [ "$root" = / ]; then
				sub=${path%/}
			elif [ "$path" = "$root" ] || [[ $path == "$root"/* ]]; then
				sub=${path#"$root"}
				sub=${sub%/}
			else
				continue # our cgroup is not under what this mount shows
			fi
			[ -d "$mnt$sub" ] && echo "$ctl|$mnt$sub"
		done
	done </proc/self/mountinfo 2>/dev/null
	return 0
}

esc_cgroup_parents() {
	local ctl dir
	while IFS='|' read -r ctl dir; do
		[ -d "$dir/corral" ] && echo "$dir/corral"
	done < <(esc_cgroup_ours) | sort -u
	return 0
}

# Only directories this user owns: a run makes its cgroup as the user it runs as, and a suite
# of another user beside this one (make check's uid 65534 pass beside root's) shares the
# parent directory, where its own runs' cgroups (and its tests' deliberately stale ones) are
# none of this case's doing.
esc_cgroup_runs() { # -> every corral-<pid>-<n> run directory of this user, one a line
	local p d
	for p in $(esc_cgroup_parents); do
		for d in "$p"/corral-*; do
			[ -d "$d" ] && [ -O "$d" ] && echo "$d"
		done
	done
	return 0
}

esc_ev_before() {
	ESC_EV_DIR=$(mktemp -d /tmp/corral-ev.XXXXXX) || fail "host-side evidence: cannot make a canary directory in /tmp"
	chmod 0777 "$ESC_EV_DIR"
	mkdir "$ESC_EV_DIR/.l"
	ESC_EV_FILE=$ESC_EV_DIR/canary
	ESC_EV_SECRET="ev-secret-$RANDOM$RANDOM$RANDOM"
	echo "$ESC_EV_SECRET" >"$ESC_EV_FILE"
	chmod 0666 "$ESC_EV_FILE"
	ESC_EV_HASH=$(esc_hash "$ESC_EV_FILE")
	"$PROBE" canary-listen "$ESC_EV_DIR/.l" >/dev/null 2>&1 &
	ESC_EV_LPID=$!
	local i
	for i in $(seq 1 200); do
		[ -s "$ESC_EV_DIR/.l/addr" ] && break
		kill -0 "$ESC_EV_LPID" 2>/dev/null || break
		sleep 0.01
	done
	read -r ESC_EV_PORT ESC_EV_ABSTRACT ESC_EV_V6 <"$ESC_EV_DIR/.l/addr" 2>/dev/null ||
		fail "host-side evidence: the canary listener did not start"
	ESC_EV_CGROUPS=$(esc_cgroup_runs | LC_ALL=C sort)
	export ESC_EV_FILE ESC_EV_SECRET ESC_EV_PORT ESC_EV_ABSTRACT
}

# The checks after the case; prints one line per failed piece of evidence.
esc_ev_after() {
	local counts tcp abs f extra="" i live="" cg members m s ours
	# the listeners were stopped (esc_run_case): what they accepted, queued ones included
	counts=$(cat "$ESC_EV_DIR/.l/counts" 2>/dev/null)
	if [[ $counts =~ ^tcp=([0-9]+)\ abstract=([0-9]+)$ ]]; then
		tcp=${BASH_REMATCH[1]} abs=${BASH_REMATCH[2]}
		[ "$tcp" = 0 ] || echo "host-side evidence: the TCP canary on 127.0.0.1$([ "${ESC_EV_V6:-0}" = 1 ] && echo ' and [::1]'):$ESC_EV_PORT accepted $tcp connection(s)"
		[ "$abs" = 0 ] || echo "host-side evidence: the abstract unix canary @$ESC_EV_ABSTRACT accepted $abs connection(s)"
	else
		echo "host-side evidence: the canary listener died during the case (no counts: '$counts')"
	fi
	# the canary file, and nothing new beside it
	if [ ! -f "$ESC_EV_FILE" ]; then
		echo "host-side evidence: the canary file $ESC_EV_FILE was removed"
	elif [ "$(esc_hash "$ESC_EV_FILE")" != "$ESC_EV_HASH" ]; then
		echo "host-side evidence: the canary file $ESC_EV_FILE changed: $(head -c 100 "$ESC_EV_FILE" | tr -cd '[:print:]')"
	fi
	for f in "$ESC_EV_DIR"/* "$ESC_EV_DIR"/.[!.]*; do
		[ -e "$f" ] || [ -L "$f" ] || continue
		[ "$f" = "$ESC_EV_FILE" ] || [ "$f" = "$ESC_EV_DIR/.l" ] || extra="$extra ${f##*/}"
	done
	[ -z "$extra" ] || echo "host-side evidence: new files next to the canary in $ESC_EV_DIR:$extra"
	# survivors: everything the case started is a descendant of this shell (a subreaper). A
	# listing that fails proves nothing: that is a failed piece of evidence, not "none".
	local drc=0 derr=""
	for i in $(seq 1 30); do
		live=$("$PROBE" descendants $$ 2>"$ESC_EV_DIR/.l/descendants.err")
		drc=$?
		if [ $drc -ne 0 ]; then
			derr=$(head -c 200 "$ESC_EV_DIR/.l/descendants.err" | tr '\n' ' ')
			echo "host-side evidence: cannot list the processes the case started (probe descendants exited $drc: $derr${live:+ $(head -c 100 <<<"$live")})"
			live=""
			break
		fi
		[ -z "$live" ] && break
		sleep 0.1
	done
	if [ -n "$live" ]; then
		echo "host-side evidence: $(wc -l <<<"$live") process(es) the case started outlived it: $(head -3 <<<"$live" | tr '\n' ';')"
	fi
	# cgroups the case made: none may still hold a process. A new cgroup whose supervisor is
	# alive and not ours belongs to another test running alongside and is left alone.
	for cg in $(LC_ALL=C comm -13 <(echo "$ESC_EV_CGROUPS") <(esc_cgroup_runs | LC_ALL=C sort)); do
		members=$(cat "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' ')
		[ -z "${members// /}" ] && continue
		s=${cg##*/corral-}
		s=${s%%-*}
		ours=""
		[ -d "/proc/$s" ] || ours="its supervisor (pid $s) is gone"
		for m in $s $members; do
			grep -q "^$m " <<<"$live" && ours="pid $m is this test's"
		done
		[ -n "$ours" ] || continue
		for i in $(seq 1 30); do # a sandbox being torn down empties it in a moment
			members=$(cat "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' ')
			[ -z "${members// /}" ] && break
			sleep 0.1
		done
		[ -z "${members// /}" ] || echo "host-side evidence: the cgroup $cg still has members ($members; $ours)"
	done
	# leave nothing behind, whatever the verdict
	[ -z "$live" ] || kill -9 $(cut -d' ' -f1 <<<"$live") 2>/dev/null
	rm -rf "$ESC_EV_DIR"
	return 0
}

# Run CASE (a function) for DOOR (cli or mcp) inside the evidence checks. The test's shell
# first re-executes itself as a child subreaper (probe subreaper), sourcing the suite again
# (the runner's prelude, suite_source_cmd).
esc_run_case() { # DOOR CASE
	export CORRAL_VIA=$1
	local fn=$2 rc ev
	if [ "${ESC_SUBREAPER:-}" != "$$" ] && [ -x "${PROBE:-}" ] && [ -d "${TESTDIR:-}" ]; then
		export ESC_SUBREAPER=$$ # exec keeps the pid
		exec "$PROBE" subreaper bash -c "set -u; $(suite_source_cmd)
			${FUNCNAME[1]}"
	fi
	[ "${ESC_SUBREAPER:-}" = "$$" ] || fail "host-side evidence: cannot make the test's shell a subreaper (PROBE=${PROBE:-unset})"
	esc_ev_before
	trap 'kill -9 $ESC_EV_LPID 2>/dev/null; rm -rf "$ESC_EV_DIR"' EXIT
	trap 'exit 143' TERM INT HUP
	# the case runs in a subshell: its fail() and its own esc_defer cleanup end there
	(
		ESC_CLEANUP=()
		"$fn"
	)
	rc=$?
	kill -TERM "$ESC_EV_LPID" 2>/dev/null
	wait "$ESC_EV_LPID" 2>/dev/null
	ev=$(esc_ev_after)
	trap - EXIT
	if [ -n "$ev" ]; then
		[ $rc -eq 0 ] || echo "    (the case itself failed too, exit $rc)" >&2
		fail "$(sed '2,$s/^/    /' <<<"$ev")"
	fi
	return $rc
}

# Register the cases defined so far for both front doors: escape_case_X becomes
# test_escape_cli_X and test_escape_mcp_X, each run by esc_run_case. A one-door test defined
# directly as test_escape_cli_X or test_escape_mcp_X is renamed esc_door_cli_X (or _mcp_) and
# wrapped the same way. Called at the end of every escape_*.sh file (each call registers
# everything sourced before it, so the order of sourcing does not matter).
esc_register() {
	local c n door
	for c in $(declare -F | awk '{print $3}' | grep '^escape_case_'); do
		n=${c#escape_case_}
		eval "test_escape_cli_$n() { esc_run_case cli $c; }"
		eval "test_escape_mcp_$n() { esc_run_case mcp $c; }"
		eval "test_escape_mcppre_$n() { esc_run_case mcp-prebuilt $c; }"
	done
	for c in $(declare -F | awk '{print $3}' | grep -E '^test_escape_(cli|mcp)_'); do
		n=${c#test_escape_}
		door=${n%%_*}
		n=${n#*_}
		declare -F "escape_case_$n" >/dev/null && continue # generated above
		declare -F "esc_door_${door}_$n" >/dev/null && continue # wrapped already
		eval "$(declare -f "$c" | sed "1s/^$c /esc_door_${door}_$n /")"
		eval "$c() { esc_run_case $door esc_door_${door}_$n; }"
	done
}

# The wrapper itself can fail: a case that leaves every kind of evidence behind (a connection
# to each canary listener, a changed canary file, a file planted next to it, a setsid daemon,
# and as root a corral-* cgroup with a member) is failed with each one named, and what it left
# running is killed. Control: an empty case passes the same wrapper.
test_escape_evidence_wrapper_catches_leaks() {
	local m out rc cgp="" cgnew="" made_parent="" evdir
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	esc_defer "pkill -9 -f '$WS/$m' 2>/dev/null"
	if is_root; then # where corral makes its cgroups: the pids hierarchy, else the v2 tree
		cgp=$(esc_cgroup_ours | sed -n 's/^pids|\(.*\)$/\1\/corral/p' | head -1)
		[ -n "$cgp" ] || cgp=$(esc_cgroup_ours | sed -n 's/^|\(.*\)$/\1\/corral/p' | head -1)
	fi
	if [ -n "$cgp" ]; then
		[ -d "$cgp" ] || made_parent=1
		cgnew="$cgp/corral-999999999-$$" # a pid above any pid_max: its supervisor is gone
		# (its member is killed first: it may have been reparented away from the subreaper,
		# out of the wrapper's reach, and a cgroup with a member cannot be removed; left
		# behind, it would fail the next case's evidence check)
		esc_defer "for i in 1 2 3 4 5 6 7 8 9 10; do for p in \$(cat '$cgnew/cgroup.procs' 2>/dev/null); do kill -9 \$p 2>/dev/null; done; rmdir '$cgnew' 2>/dev/null && break; sleep 0.2; done; [ -z '$made_parent' ] || rmdir '$cgp'"
	fi
	local bad="esc_bad_case() {
		\"\$PROBE\" connect-tcp 127.0.0.1 \"\$ESC_EV_PORT\"
		[ \"\$ESC_EV_V6\" != 1 ] || \"\$PROBE\" connect-tcp ::1 \"\$ESC_EV_PORT\"
		\"\$PROBE\" connect-abstract \"\$ESC_EV_ABSTRACT\"
		echo tampered >>\"\$ESC_EV_FILE\"
		touch \"\${ESC_EV_FILE%/*}/planted\"
		(setsid '$WS/$m' 60 >/dev/null 2>&1 &)
		if [ -n '$cgnew' ]; then
			mkdir -p '$cgnew'
			'$WS/$m' 61 >/dev/null 2>&1 &
			echo \$! >'$cgnew/cgroup.procs'
		fi
	}
	esc_good_case() { :; }"
	local run="set -u; source '$TESTDIR/lib.sh'; source '$TESTDIR/escape/escape.sh'; export ESC_SUBREAPER=\$\$; $bad; esc_run_case cli"
	out=$("$PROBE" subreaper bash -c "$run esc_good_case" 2>&1)
	assert_eq "$?:$out" "0:" "control: an empty case in the wrapper"
	out=$("$PROBE" subreaper bash -c "$run esc_bad_case" 2>&1)
	rc=$?
	[ $rc -ne 0 ] || fail "the wrapper passed a case that left evidence: $out"
	if grep -q ' lo$' /proc/net/if_inet6 2>/dev/null; then # IPv6 loopback: ::1 is watched too
		assert_contains "$out" "host-side evidence: the TCP canary on 127.0.0.1 and [::1]:"
		assert_contains "$out" "accepted 2 connection(s)"
	else
		assert_contains "$out" "host-side evidence: the TCP canary on 127.0.0.1:"
	fi
	assert_contains "$out" "host-side evidence: the abstract unix canary @corral-ev-"
	assert_contains "$out" "host-side evidence: the canary file /tmp/corral-ev."
	assert_contains "$out" "new files next to the canary in /tmp/corral-ev."
	assert_contains "$out" "process(es) the case started outlived it"
	assert_contains "$out" "$m 60"
	if [ -n "$cgnew" ]; then
		assert_contains "$out" "host-side evidence: the cgroup $cgnew still has members"
	fi
	evdir=$(grep -o '/tmp/corral-ev\.[A-Za-z0-9]*' <<<"$out" | head -1)
	[ ! -e "$evdir" ] || fail "the wrapper left its canary directory $evdir"
	assert_no_survivor "$m"
	# a process listing that fails (hidepid, a broken probe) fails the case: an empty case,
	# with a probe whose descendants fails
	printf '#!/bin/sh\n[ "$1" = descendants ] && { echo errno=EACCES; exit 1; }\nexec "%s" "$@"\n' \
		"$PROBE" >"$WS/probe-nolist"
	chmod 0755 "$WS/probe-nolist"
	out=$(PROBE="$WS/probe-nolist" "$PROBE" subreaper bash -c "$run esc_good_case" 2>&1)
	rc=$?
	[ $rc -ne 0 ] || fail "the wrapper passed a case whose process listing failed: $out"
	assert_contains "$out" "host-side evidence: cannot list the processes the case started (probe descendants exited 1"
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
