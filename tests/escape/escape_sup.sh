# Isolation battery, supervisor group: the supervisor outlives and outranks its sandbox, and
# nothing of the sandbox outlives the supervisor. Helpers: tests/escape/escape.sh.

# SIGKILL of a front door mid-run (no chance to clean up): the sandbox dies with it. WHO: cli
# kills `corral run`; server kills the `corral mcp` server; client kills the MCP client (the
# server sees EOF on its stdin and must kill the call's sandbox, then exit).
esc_sigkill_front_door() { # WHO MARK [PREFIX...]; PREFIX e.g. "$NOLAYER" userns --, run flags in ESC_ARGS
	local who=$1 m=$2 bg srv="" victim i
	shift 2
	cp /bin/sleep "$WS/$m"
	local cmd="./$m 1000 & ./$m 1001 & (setsid ./$m 1002 &); exec ./$m 1003"
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
	cr -t 0.5 --kill-after 0.2 -c "setsid ./$m 300 & (setsid ./$m 301 &); (./$m 302 &) ; nohup ./$m 303 >/dev/null 2>&1 & exec ./$m 304" >/dev/null 2>&1
	assert_eq $? 124 "exit status on timeout"
	end=$(date +%s%N)
	[ $(((end - start) / 1000000)) -lt 5000 ] || fail "the timeout took $(((end - start) / 1000000)) ms"
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
	[ $(((end - start) / 1000000)) -lt 3000 ] || fail "the run waited $(((end - start) / 1000000)) ms for the grandchild"
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
./probe sleep 0.6
SH
	# the supervisor inherits this shell's limits (corral sets none of its own)
	local limits_before
	limits_before=$(grep 'open files' /proc/self/limits)
	esc_bg_corral "$out" "$@" sh attack.sh
	sleep 0.3
	# mid-run: alive, not stopped, not traced, limits unchanged
	kill -0 "$ESC_SUP" || fail "the supervisor died during the attack"
	assert_eq "$(awk '/^TracerPid/{print $2}' "/proc/$ESC_SUP/status")" 0 "supervisor TracerPid"
	assert_not_contains "$(awk '/^State/{print $2}' "/proc/$ESC_SUP/status")" T
	local lim_now
	lim_now=$(grep 'open files' "/proc/$ESC_SUP/limits")
	esc_wait_pid "$ESC_SUP" 100 || fail "the supervisor did not finish"
	wait "$ESC_BG" 2>/dev/null
	assert_eq "$lim_now" "$limits_before" "the supervisor's open-files limit was changed from inside"
	local so
	so=$(jget stdout <"$out") || fail "no JSON result from the supervisor: $(cat "$out.err")"
	assert_eq "$(jget exit_code <"$out")" 0 "the sandbox's exit status as reported"
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

# Register the cases for both front doors (esc_register, escape.sh; any sourcing order works).
if declare -F esc_register >/dev/null; then esc_register; fi
