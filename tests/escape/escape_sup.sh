# Escape battery, supervisor group: the supervisor outlives and outranks its sandbox, and
# nothing of the sandbox outlives the supervisor. Helpers: tests/escape/escape.sh.

# SIGKILL of a front door mid-run (no chance to clean up): the sandbox dies with it. WHO: cli
# kills `corral run`; server kills the `corral mcp` server; client kills the MCP client (the
# server sees EOF on its stdin and must kill the call's sandbox, then exit).
esc_sigkill_front_door() { # WHO MARK [PREFIX...]; PREFIX e.g. "$NOLAYER" userns --, run flags in ESC_ARGS
	local who=$1 m=$2 bg srv="" victim i
	shift 2
	cp /bin/sleep "$WS/$m"
	# $TMPDIR: without a mount namespace the private /tmp is a host directory, which a killed
	# supervisor cannot remove (a known leak, removed here by its exact name)
	local cmd="echo \"\$TMPDIR\" > .tmpdir; ./$m 1000 & ./$m 1001 & (setsid ./$m 1002 &); exec ./$m 1003"
	if [ "$who" = cli ]; then
		"$@" "$CORRAL" run -w "$WS" ${ESC_ARGS:-} -- sh -c "$cmd" >/dev/null 2>&1 &
		bg=$!
		victim=$bg
	else
		VIA_MCP_PIDFILE="$WS/.server.pid" python3 "$TESTDIR/escape/via_mcp.py" \
			"$@" "$CORRAL" run -w "$WS" ${ESC_ARGS:-} -- sh -c "$cmd" >/dev/null 2>&1 &
		bg=$!
		for i in $(seq 1 100); do [ -s "$WS/.server.pid" ] && break; sleep 0.02; done
		srv=$(cat "$WS/.server.pid") || fail "the MCP server did not start"
		victim=$bg
		[ "$who" = server ] && victim=$srv
	fi
	esc_defer "kill -9 \$(pgrep -f -- '^\./$m 100') $bg $srv"
	esc_defer "t=\$(cat '$WS/.tmpdir'); [[ \$t =~ ^/tmp/corral-tmp-[A-Za-z0-9]{6}\$ ]] && rm -rf \"\$t\""
	for i in $(seq 1 100); do
		[ "$(pgrep -fc -- "^\./$m 100")" -ge 4 ] && break
		sleep 0.05
	done
	[ "$(pgrep -fc -- "^\./$m 100")" -ge 4 ] || fail "the sandbox did not start its four sleepers"
	kill -9 "$victim"
	wait "$bg" 2>/dev/null
	assert_no_survivor "$m"
	if [ -n "$srv" ]; then
		esc_wait_pid "$srv" 50 || fail "the MCP server outlived its client (pid $srv)"
	fi
}

# CLI only: the supervisor is the `corral run` process itself.
test_escape_cli_sup_sigkill_supervisor_leaves_nothing() {
	esc_sigkill_front_door cli "$(esc_mark)"
}

# MCP only: the server is SIGKILLed mid-call.
test_escape_mcp_sup_sigkill_server_leaves_nothing() {
	esc_sigkill_front_door server "$(esc_mark)"
}

# MCP only: the agent host (the client) dies mid-call; the server gets EOF.
test_escape_mcp_sup_client_killed_leaves_nothing() {
	esc_sigkill_front_door client "$(esc_mark)"
}

escape_case_sup_timeout_kills_daemons() {
	local m start end
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	start=$(date +%s%N)
	cr -t 3 --kill-after 0.2 -c "setsid ./$m 300 & (setsid ./$m 301 &); (./$m 302 &) ; nohup ./$m 303 >/dev/null 2>&1 & exec ./$m 304" >/dev/null 2>&1 &
	local bg=$!
	esc_defer "kill -9 \$(pgrep -f -- '^\./$m 30') $bg"
	# control: the five daemons really ran (else "no survivor" proves nothing)
	await_procs "^\./$m 30[0-4]" 5 || fail "control: the sandbox did not start its five daemons: $(pgrep -af -- "$m")"
	wait "$bg"
	assert_eq $? 124 "exit status on timeout"
	end=$(date +%s%N)
	# a 3 s timeout (the control above must see all five before it, and it counts from before
	# the sandbox is built); the daemons would run 300 s (the bound leaves a slow machine room)
	[ $(((end - start) / 1000000)) -lt 10000 ] || fail "the timeout took $(((end - start) / 1000000)) ms"
	assert_no_survivor "$m"
}

escape_case_sup_grandchild_holding_stdout() {
	local m start end out
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	start=$(date +%s%N)
	out=$(cr -t 20 -c "(./$m 60 &); (setsid ./$m 61 >&2 &); echo main-done")
	assert_eq $? 0
	end=$(date +%s%N)
	assert_eq "$out" main-done
	# the grandchildren sleep 60 s, the timeout is 20 s: either wait shows
	[ $(((end - start) / 1000000)) -lt 10000 ] || fail "the run waited $(((end - start) / 1000000)) ms for the grandchild"
	assert_no_survivor "$m"
}

# The sandbox tries to kill, trace and read its supervisor (its host pid passed in as $SUP)
# and to change its limits; the supervisor survives untraced, unchanged, and reports.
esc_attack_supervisor() { # RUN-ARGS... (ESC_PRE may wrap corral)
	esc_probe
	local out="$WS/.result.json"
	cat >"$WS/attack.sh" <<'SH'
./probe kill $SUP 9; ./probe kill $SUP 15; ./probe kill $SUP 19; ./probe ptrace-attach $SUP
./probe process-vm-readv $SUP; ./probe open-read /proc/$SUP/environ; ./probe open-read /proc/$SUP/mem
/usr/bin/python3 -c '
import os, resource
try:
    resource.prlimit(int(os.environ["SUP"]), resource.RLIMIT_NOFILE, (7, 7)); print("ok")
except OSError as e:
    print("errno=%d" % e.errno)
'
: >attacked
./probe sleep 3
SH
	# the supervisor inherits this shell's limits (corral sets none of its own)
	local limits_before
	limits_before=$(grep 'open files' /proc/self/limits)
	esc_bg_corral "$out" "$@" sh attack.sh
	# mid-run, once the attacks are done (attack.sh marks it, then sleeps 3 s): alive, not
	# stopped, not traced, limits unchanged
	for _ in $(seq 1 200); do
		[ -e "$WS/attacked" ] && break
		kill -0 "$ESC_SUP" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$ESC_SUP" || fail "the supervisor died during the attack"
	[ -e "$WS/attacked" ] || fail "control: the sandbox did not finish its attacks within 10 s"
	assert_eq "$(awk '/^TracerPid/{print $2}' "/proc/$ESC_SUP/status")" 0 "supervisor TracerPid"
	assert_not_contains "$(awk '/^State/{print $2}' "/proc/$ESC_SUP/status")" T
	local lim_now
	lim_now=$(grep 'open files' "/proc/$ESC_SUP/limits")
	esc_wait_pid "$ESC_SUP" 100 || fail "the supervisor did not finish"
	wait "$ESC_BG" 2>/dev/null
	assert_eq "$lim_now" "$limits_before" "the supervisor's open-files limit was changed from inside"
	local so
	so=$(jget stdout <"$out") || fail "no JSON result from the supervisor: $(cat "$out.err")"
	assert_eq "$(jget exit_code <"$out")" 0 "the sandbox's exit status as reported (signal $(jget signal <"$out"), limit $(jget limit <"$out"), error $(jget error <"$out"), stdout $(jget stdout <"$out" | tr '\n' ' '))"
	# every attack line failed (the last line is the sleep's ok)
	local bad
	bad=$(head -n -1 <<<"$so" | grep -v '^errno=' || true)
	[ -z "$bad" ] || fail "attacks on the supervisor that succeeded: $(tr '\n' ' ' <<<"$so")"
}

escape_case_sup_sandbox_cannot_attack_supervisor() {
	esc_attack_supervisor
}

# A host process of the same user: the sandbox cannot signal it (it cannot even see it).
escape_case_sup_sandbox_cannot_signal_host_process() {
	esc_probe
	esc_canary
	local m out
	m=$(esc_mark)
	esc_host_sleeper "$m" 30
	out=$(cr -c "./probe kill $ESC_HOST_PID 9; ./probe kill $ESC_HOST_PID 19")
	assert_eq "$(esc_nerr "$out")" 2 "kill of a host pid: $out"
	sleep 0.1
	kill -0 "$ESC_HOST_PID" || fail "the host process was killed from the sandbox"
	assert_not_contains "$(awk '/^State/{print $2}' "/proc/$ESC_HOST_PID/status")" T
	# control: without isolation the same kill works
	assert_eq "$(cr --mode none -- ./probe kill "$ESC_HOST_PID" 9)" ok "control kill"
	esc_wait_pid "$ESC_HOST_PID" 20 || fail "control: the host process survived SIGKILL"
}

# An output flood: 256 MiB on stdout in one endless line with invalid UTF-8, and on stderr in
# short lines. The supervisor keeps --max-output per stream (head and tail), reports the true
# byte counts, its JSON stays valid and small, and it finishes promptly.
escape_case_sup_output_flood() {
	local out start end len
	start=$(date +%s%N)
	out=$(cr --json -t 60 --max-output 64k -c 'head -c 268435456 /dev/zero | tr "\0" "\377" &
		yes flood | head -c 268435456 >&2; wait')
	end=$(date +%s%N)
	len=${#out}
	[ "$len" -lt $((512 * 1024)) ] || fail "the JSON result is $len bytes with --max-output 64k"
	assert_eq "$(jget exit_code <<<"$out")" 0 "$(jget error <<<"$out")"
	assert_eq "$(jget stdout_bytes <<<"$out")" 268435456
	assert_eq "$(jget stderr_bytes <<<"$out")" 268435456
	assert_eq "$(jget stdout_truncated <<<"$out")" true
	assert_eq "$(jget stderr_truncated <<<"$out")" true
	[ $(((end - start) / 1000000)) -lt 30000 ] || fail "the flood took $(((end - start) / 1000000)) ms"
}

# The sandbox's pid 1 is corral's init: the command cannot kill or stop it (it is the init of
# the command's pid namespace), so the run goes on and is reported. (Safety: the signals go to
# pid 1 only when it is corral-init, never to a host's init.)
escape_case_sup_sandbox_cannot_kill_its_init() {
	esc_probe
	local out so
	out=$(cr --json -t 20 -c 'if [ "$(cat /proc/1/comm)" != corral-init ]; then echo not-our-init; exit 0; fi
		./probe kill 1 9; ./probe kill 1 15; ./probe kill 1 19; ./probe kill 1 2; sleep 0.3;
		grep State /proc/1/status; echo alive')
	so=$(jget stdout <<<"$out")
	assert_not_contains "$so" not-our-init
	assert_eq "$(jget exit_code <<<"$out")" 0 "$(jget error <<<"$out")"
	assert_contains "$so" alive
	assert_not_contains "$so" stopped
	assert_eq "$(jget timed_out <<<"$out")" false
}

# The init reaps: five orphans (re-parented to pid 1, the init) exit during the run and none
# stays a zombie. Control: a child whose parent never waits (exec'd sleep) does show as Z in
# the same listing, so the check can see a zombie; and the orphans were the init's children.
# Each step waits for its state (up to 5 and 10 s) instead of sleeping a fixed time, so a
# slow machine delays the case without failing it; an init that does not reap leaves the
# orphans as zombies named orph, and "orph left" stays 5.
escape_case_sup_init_reaps_orphans() {
	local out so
	out=$(cr --json -t 30 -c 'cp /bin/sleep orph; cp /bin/sleep zomb
		for i in 1 2 3 4 5; do (./orph 2 &); done
		(sh -c "./zomb 0.1 & exec sleep 25" &)
		orphans() { grep -l "^PPid:[[:space:]]*1$" /proc/[0-9]*/status 2>/dev/null | xargs grep -l "^Name:[[:space:]]*orph$" 2>/dev/null | wc -l; }
		left() { grep -l "^Name:[[:space:]]*orph$" /proc/[0-9]*/status 2>/dev/null | wc -l; }
		for t in $(seq 100); do n=$(orphans); [ "$n" -ge 5 ] && break; sleep 0.05; done
		echo "orphans of pid 1: $n"
		for t in $(seq 200); do l=$(left); [ "$l" -eq 0 ] && break; sleep 0.05; done
		for p in /proc/[0-9]*; do
			[ "$(awk "/^State/{print \$2}" $p/status 2>/dev/null)" = Z ] || continue
			echo "Z $(cat $p/comm) ppid=$(awk "/^PPid/{print \$2}" $p/status)"
		done
		echo "orph left: $l"
		echo end')
	assert_eq "$(jget exit_code <<<"$out")" 0 "$(jget error <<<"$out")"
	so=$(jget stdout <<<"$out")
	assert_contains "$so" "orphans of pid 1: 5"
	assert_contains "$so" "orph left: 0"
	assert_not_contains "$so" "Z orph"
	# control: the never-reaped child is seen as a zombie (its parent is not the init)
	[[ $so =~ Z\ zomb\ ppid=([0-9]+) ]] || fail "control: no zombie seen for a child whose parent never waits: $so"
	[ "${BASH_REMATCH[1]}" != 1 ] || fail "the init left a zombie of its own: $so"
	assert_contains "$so" end
}

# MCP only: two calls run at once on one server. Each is its own sandbox: the second sees
# neither the first's processes, nor its /tmp, nor its descriptors, and both are answered.
test_escape_mcp_sup_concurrent_calls_isolated() {
	esc_probe
	local m out
	m=$(esc_mark)
	cp /bin/sleep "$WS/$m"
	out=$(python3 - "$TESTDIR/escape" "$CORRAL" "$WS" "$m" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1])
import via_mcp
corral, ws, m = sys.argv[2:5]
srv = via_mcp.Server([corral, "mcp", "-w", ws, "-t", "30"])
srv.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
assert srv.wait_response(1, time.monotonic() + 10)
srv.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_command",
          "arguments": {"command": "echo first-%s > /tmp/first; exec ./%s 3" % (m, m)}}})
time.sleep(0.5)
srv.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run_command",
          "arguments": {"command": "./probe ls-fds; ./probe ls-pids; cat /tmp/first; ps -eo args"}}})
second = srv.wait_response(3, time.monotonic() + 20)
first = srv.wait_response(2, time.monotonic() + 20)
srv.finish()
s = second["result"]["structuredContent"]
f = first["result"]["structuredContent"]
print("second-stdout: " + s["stdout"].replace("\n", " | "))
print("second-stderr: " + s["stderr"].replace("\n", " | "))
print("first-exit: %s" % f["exit_code"])
PY
)
	assert_contains "$out" "second-stdout: 0 1 2 | "
	assert_not_contains "$out" "./$m"
	assert_not_contains "$out" "first-$m"
	assert_contains "$out" "first-exit: 0"
	assert_no_survivor "$m"
}

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
