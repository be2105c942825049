# corral shell: an interactive shell on a pty, driven by tests/pty_harness.py as a person at a
# terminal would drive it (the harness gives corral a terminal of its own and keeps the master
# side). Evidence is host-side: files on the host, processes on the host, corral's status,
# and the harness checks after every session that corral left its terminal in cooked mode.
# The harness reads its script on stdin, so no marker below shows in a command line but the
# sandboxed processes' own. In the unquoted here-documents, \$ is a '$' for the sandbox.

# pty_sh [HARNESS OPTIONS] [-- CORRAL SHELL OPTIONS] <script: run corral shell -w $WS on a pty
pty_sh() {
	local hopts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do hopts+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	python3 "$TESTDIR/pty_harness.py" "${hopts[@]}" --transcript "$WS/.transcript" -- \
		"$CORRAL" shell -w "$WS" --audit off "$@"
}
PROMPT='\[corral\] [^\r\n]* [$#] $'

test_shell_pty_runs_sandboxed() {
	local out rc mark=corral-shell-$RANDOM$RANDOM
	out=$(mktemp -d /tmp/corral-shell-out.XXXXXX)
	chmod 0777 "$out"
	pty_sh -- --audit "$WS/audit.db" <<EOF
expect $PROMPT
send echo \$((6*7))\n
expect 42\r\n
send echo "host=\$(hostname)"\n
expect host=corral\r\n
send echo inside >in-ws.txt; echo "w=\$?"\n
expect w=0
send echo outside >$out/$mark 2>/dev/null; echo "o=\$?"\n
expect o=[1-9]
send echo tmp >/tmp/$mark; cat /tmp/$mark\n
expect [^/]tmp\r\n
send exit\n
EOF
	rc=$?
	assert_eq "$rc" 0 "corral shell's status after 'exit'"
	assert_eq "$(cat "$WS/in-ws.txt")" inside
	[ -e "$out/$mark" ] && fail "a file written outside the workspace appeared on the host"
	[ -e "/tmp/$mark" ] && fail "the sandbox's /tmp is the host's"
	rm -rf "$out"
	# the session is in the audit store, as a run of the shell
	local list
	list=$("$CORRAL" audit --db "$WS/audit.db" list --json)
	python3 -c 'import json,sys
rows = json.load(sys.stdin)
assert len(rows) == 1 and rows[0]["argv"][0] == "bash" and rows[0]["exit_code"] == 0, rows' <<<"$list" ||
		fail "the session is not recorded: $list"
}

test_shell_pty_state_persists() {
	mkdir -p "$WS/sub/dir"
	pty_sh <<EOF
expect $PROMPT
send cd sub/dir && export GREETING=hello-there && f() { echo "fn-\$1"; }\n
expect $PROMPT
send echo "p=\$(pwd) g=\$GREETING"; f ok\n
expect p=$WS/sub/dir g=hello-there\r\nfn-ok\r\n
send exit 0\n
EOF
	assert_eq $? 0
}

test_shell_pty_resize() {
	# the size at start comes from corral's terminal; a resize reaches the foreground job
	pty_sh --rows 30 --cols 90 <<EOF
expect $PROMPT
send stty size\n
expect 30 90\r\n
send sh -c 'trap "stty size | sed s/^/winch=/; exit 0" WINCH; echo ready; while :; do sleep 0.05; done'\n
expect ready\r\n
resize 33 101
expect winch=33 101
expect $PROMPT
send stty size\n
expect 33 101\r\n
send exit\n
EOF
	assert_eq $? 0
}

test_shell_pty_ctrl_c_and_job_control() {
	local a=1000.$RANDOM$RANDOM b=1001.$RANDOM$RANDOM
	pty_sh <<EOF
expect $PROMPT
send sleep $a\n
proc sleep $a
send \x03
noproc sleep $a
expect $PROMPT
send echo "st=\$? after=\$((40+2))"\n
expect st=130 after=42
send sleep $b\n
proc sleep $b
send \x1a
expect Stopped
send fg\n
expect fg\r\n
proc sleep $b
send \x03
noproc sleep $b
send echo "st=\$? alive=\$((1+1))"\n
expect st=130 alive=2
send exit 0\n
EOF
	assert_eq $? 0
	assert_no_survivor "sleep $a"
	assert_no_survivor "sleep $b"
}

test_shell_pty_exit_status() {
	pty_sh <<'EOF'
expect \[corral\]
send exit 7\n
EOF
	assert_eq $? 7 "exit 7"
	# Ctrl-D at the prompt: bash exits with the last command's status
	pty_sh <<'EOF'
expect \[corral\]
send (exit 4)\n
expect \[corral\]
send \x04
EOF
	assert_eq $? 4 "Ctrl-D after a status of 4"
	pty_sh -- -- sh -c 'exit 3' </dev/null; assert_eq $? 3 "an explicit shell command"
	pty_sh -- -- sh -c 'kill -TERM $$' </dev/null; assert_eq $? 143 "killed by SIGTERM"
	pty_sh -- -- no-such-shell-xyz </dev/null; assert_eq $? 127 "not found"
	"$CORRAL" shell -w "$WS" -c 'echo' </dev/null 2>/dev/null; assert_eq $? 125 "-c"
	"$CORRAL" shell -w "$WS" --memory lots </dev/null 2>/dev/null; assert_eq $? 125 "a bad limit"
	local err start ms
	err=$("$CORRAL" shell -w "$WS" --audit off -t 0.3 -- sleep 30 2>&1 </dev/null)
	assert_eq $? 124 "-t"
	assert_contains "$err" "timed out"
	# at the timeout an interactive bash (which ignores SIGTERM) is hung up, not left to the
	# --kill-after grace
	start=$(date +%s%N)
	pty_sh -- -t 2 --kill-after 10 <<'EOF'
expect \[corral\]
send sleep 1000\n
EOF
	assert_eq $? 124 "-t on a pty"
	ms=$((($(date +%s%N) - start) / 1000000))
	# left to the grace it would take 12 s
	[ "$ms" -lt 8000 ] || fail "the timed-out session took $ms ms"
	assert_contains "$(cat "$WS/.transcript")" "timed out after"
}

test_shell_pty_profile_applies() {
	# the profile flags are corral run's: readonly makes the workspace read-only
	pty_sh -- --profile readonly <<'EOF'
expect \[corral\]
send echo x >ro.txt 2>/dev/null; echo "w=$?"\n
expect w=1
send exit\n
EOF
	assert_eq $? 0
	[ -e "$WS/ro.txt" ] && fail "the readonly profile did not apply"
	local plan
	plan=$("$CORRAL" shell -w "$WS" --dry-run --json) || fail "--dry-run"
	assert_eq "$(jget command.argv.0 <<<"$plan")" bash
	assert_eq "$(jget limits.timeout_ms <<<"$plan")" 0 "an interactive shell has no timeout"
	plan=$("$CORRAL" shell -w "$WS" --dry-run --json -t 5m -- sh -i)
	assert_eq "$(jget command.argv.0 <<<"$plan")" sh
	assert_eq "$(jget limits.timeout_ms <<<"$plan")" 300000
	local h
	h=$("$CORRAL" help shell); assert_eq $? 0
	for flag in --workspace --cwd --timeout --kill-after --profile --ro --rw --hide --env \
		--net --mode --memory --pids --audit --dry-run Ctrl-C; do
		assert_contains "$h" "$flag"
	done
	assert_eq "$("$CORRAL" shell --help)" "$h"
	assert_contains "$("$CORRAL" --help)" "shell"
	if [ -n "${DOCS:-}" ] && command -v man >/dev/null; then
		local m
		m=$(MANWIDTH=100 man -l "$DOCS/corral.1" 2>/dev/null)
		assert_contains "$m" "corral shell [OPTIONS]"
		assert_contains "$m" "bash --norc -i"
	fi
}

test_shell_pty_signals_end_session() {
	# SIGTERM to corral, or its terminal going away, hangs up the sandbox's terminal: the
	# shell and its jobs end, and corral restores its terminal (checked by the harness)
	local a=1002.$RANDOM$RANDOM b=1003.$RANDOM$RANDOM rc
	pty_sh <<EOF
expect $PROMPT
send sleep $a &\n
proc sleep $a
send sleep $b\n
proc sleep $b
signal TERM
EOF
	rc=$?
	[ "$rc" -ge 128 ] && [ "$rc" -lt 200 ] || fail "status $rc after SIGTERM"
	assert_no_survivor "sleep $a"
	assert_no_survivor "sleep $b"
	pty_sh <<EOF
expect $PROMPT
send sleep $a &\n
proc sleep $a
hangup
EOF
	rc=$?
	[ "$rc" -ge 128 ] && [ "$rc" -lt 200 ] || fail "status $rc after a hang-up"
	assert_no_survivor "sleep $a"
}

test_shell_stdin_not_a_tty() {
	local out rc start
	out=$(printf 'echo $((6*7))\nexit 5\n' | "$CORRAL" shell -w "$WS" --audit off)
	rc=$?
	assert_eq "$rc" 5
	assert_contains "$out" $'42\r\n'
	# the end of the input is typed as Ctrl-D: the shell ends with the last status
	start=$(date +%s)
	out=$(printf 'echo "x=$((2+3))"\n(exit 6)\n' | "$CORRAL" shell -w "$WS" --audit off)
	assert_eq $? 6
	assert_contains "$out" "x=5"
	# a command reading its input gets the end of it too
	out=$(printf 'cat >got.txt; echo "c=$?"\nline1\n' | "$CORRAL" shell -w "$WS" --audit off)
	assert_eq $? 0
	assert_contains "$out" "c=0"
	assert_eq "$(tr -d '\r' <"$WS/got.txt")" line1
	"$CORRAL" shell -w "$WS" --audit off </dev/null >/dev/null
	assert_eq $? 0 "stdin /dev/null"
	[ $(($(date +%s) - start)) -lt 15 ] || fail "end of input took too long to end the shell"
	# SIGINT to corral is typed as Ctrl-C: the foreground job ends, the shell stays
	local a=1004.$RANDOM$RANDOM pid
	mkfifo "$WS/.in"
	"$CORRAL" shell -w "$WS" --audit off -t 30 <"$WS/.in" >"$WS/.sigint.out" &
	pid=$!
	exec 3>"$WS/.in"
	printf 'sleep %s\n' "$a" >&3
	for _ in $(seq 1 100); do pgrep -f "sleep $a" >/dev/null && break; sleep 0.05; done
	pgrep -f "sleep $a" >/dev/null || fail "the sleep did not start"
	kill -INT "$pid"
	assert_no_survivor "sleep $a"
	printf 'echo "alive=$((3*3))"\n' >&3
	exec 3>&-
	wait "$pid"
	assert_eq $? 0 "the status after Ctrl-C, echo and end of input"
	assert_contains "$(cat "$WS/.sigint.out")" "alive=9"
}

test_shell_pty_term_is_callers() {
	TERM=vt100 pty_sh <<'EOF'
expect \[corral\]
send echo "t=$TERM"\n
expect t=vt100
send exit\n
EOF
	assert_eq $? 0
}
