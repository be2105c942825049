# Sessions and background jobs (issue: sessions), through tests/session_tool.c, a driver of
# the library API that reads one operation per line and answers each with one JSON line.
# A test drives one or more session_tool processes op by op (ses_open/ses_op/ses_exec below), so
# that host-side evidence is taken at the right moment: files in the workspace, surviving
# processes (by a unique marker in their command line), connections from the host.
# Idle expiry lives in the MCP server, not the library: tests/integration/mcp_session.sh covers it.

# The test helper: beside corral in the test copy, else in the build tree.
session_tool_path() {
	local t=${SESSION_TOOL:-}
	[ -n "$t" ] || t=$(dirname "$CORRAL")/session_tool
	[ -x "$t" ] || t=${BUILD:-build}/tests/session_tool
	[ -x "$t" ] || fail "session_tool is not built: make ${BUILD:-build}/tests/session_tool (tests/run.sh copies it beside corral)"
	echo "$t"
}

declare -A SES_IN SES_OUT SES_PID
SES_R=

# ses_open NAME [OPTIONS]: a session_tool process on $WS (a 30 s default timeout, so that the
# grace before SIGKILL is 300 ms), fed through fifos; fails unless the session opens.
ses_open() {
	local name=$1 t d=$WS/.st w r
	shift
	t=$(session_tool_path) || exit 1
	mkdir -p "$d"
	mkfifo "$d/$name.in" "$d/$name.out" || fail "mkfifo in $d"
	"$t" "$WS" --timeout 30000 "$@" <"$d/$name.in" >"$d/$name.out" 2>"$d/$name.err" &
	SES_PID[$name]=$!
	exec {w}>"$d/$name.in"
	exec {r}<"$d/$name.out"
	SES_IN[$name]=$w
	SES_OUT[$name]=$r
	ses_read "$name" 30
	[[ $SES_R == '{"session":'* ]] || fail "session $name did not open: $SES_R"
}

# One answer line. Not bash's read: on a pipe it takes one byte per system call, and an
# answer that carries a command's output in hex runs to hundreds of KB (16 s for 314 KB on
# the CI machine kind, past the 30 s timeout with the other pass running). The tool writes
# one line per request and then waits for the next, so head may read whole chunks: nothing
# follows the line in the pipe.
ses_read() {
	SES_R=$(timeout "${2:-30}" head -n 1 <&"${SES_OUT[$1]}") && [ -n "$SES_R" ] ||
		fail "session_tool $1 gave no answer: $(tail -c 2000 "$WS/.st/$1.err" 2>/dev/null)"
}

# ses_op NAME OP [WAIT_S]: send one operation; its JSON answer is in SES_R.
ses_op() {
	printf '%s\n' "$2" >&"${SES_IN[$1]}" || fail "session_tool $1 is gone: $(tail -c 2000 "$WS/.st/$1.err")"
	ses_read "$1" "${3:-30}"
}

# ses_exec NAME TIMEOUT_MS COMMAND: corral_session_exec; SES_R = {"result":..., "stdout_hex",
# "stderr_hex"}
ses_exec() {
	local hex
	hex=$(printf '%s' "$3" | od -An -tx1 -v | tr -d ' \n')
	ses_op "$1" "execx $2 $hex"
	[[ $SES_R == '{"result":'* ]] || fail "exec of '$3' did not give a result: ${SES_R:0:600}"
}

# ses_close NAME: end of input: the tool closes the session and must exit cleanly (with the
# sanitizer build, leaks and undefined behaviour make it fail).
ses_close() {
	local rc
	eval "exec ${SES_IN[$1]}>&-"
	wait "${SES_PID[$1]}"
	rc=$?
	eval "exec ${SES_OUT[$1]}<&-"
	[ "$rc" = 0 ] || fail "session_tool $1 exited with $rc: $(tail -c 3000 "$WS/.st/$1.err")"
	! grep -qE 'Sanitizer|runtime error' "$WS/.st/$1.err" ||
		fail "sanitizer report from session_tool $1: $(head -c 3000 "$WS/.st/$1.err")"
}

# ses_true EXPR: does a Python expression over the last answer hold? Names: d (the answer), r
# (its result, or {}), so/se (the exact stdout/stderr bytes of an exec, from the hex).
# ses_ok EXPR [WHAT]: it must.
ses_true() {
	python3 -c 'import json, sys
d = json.loads(sys.stdin.read())
r = d.get("result") or {}
so = bytes.fromhex(d.get("stdout_hex", "")); se = bytes.fromhex(d.get("stderr_hex", ""))
if eval(sys.argv[1]):
    sys.exit(0)
if r:
    keys = ("command", "exit_code", "signal", "timed_out", "limit", "duration_ms", "session")
    d = dict({k: r.get(k) for k in keys}, stdout=so[:300], stderr=se[:300])
print(str(d)[:1500], file=sys.stderr)
sys.exit(1)' "$1" <<<"$SES_R" 2>"$WS/.st/ok"
}
ses_ok() { ses_true "$1" || fail "expected $1${2:+ ($2)}; got: $(cat "$WS/.st/ok")"; }
ses_get() { jget "$1" <<<"$SES_R"; }

ses_mark() { echo "$RANDOM$RANDOM$RANDOM" | cut -c1-9; }

# A TCP port that is free on the host now.
ses_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

test_session_state_persists() {
	mkdir -p "$WS/sub/dir"
	ses_open a
	ses_exec a 0 'cd sub/dir && export GREETING=hello-there && plain=unexported && greet() { echo "fn-$1"; } && alias ll="echo aliased" && echo made-inside >note.txt'
	ses_ok 'r["exit_code"] == 0 and so == b"" and se == b""'
	ses_exec a 0 'echo "p=$(pwd) g=$GREETING v=$plain"; greet ok; ll; cat note.txt; sh -c "echo child-sees=\$GREETING"'
	ses_ok 'r["exit_code"] == 0 and r["session"]["restarted"] is False and r["session"]["ended"] is False'
	ses_ok "so == b'p=$WS/sub/dir g=hello-there v=unexported\\nfn-ok\\naliased\\nmade-inside\\nchild-sees=hello-there\\n'" "state carried over"
	ses_ok 'se == b""'
	# the file is on the host, where the shell's cwd said
	assert_eq "$(cat "$WS/sub/dir/note.txt")" made-inside
	# a host-written file is seen in the next command; a file written in one command is read
	# in the next
	echo from-host >"$WS/sub/dir/host.txt"
	ses_exec a 0 'cat host.txt; printf "%s\n" one two >two.txt'
	ses_ok 'so == b"from-host\n"'
	ses_exec a 0 'wc -l <two.txt'
	ses_ok 'so.strip() == b"2"'
	# a job starts in the shell's current directory, and sees the same files
	ses_op a 'job pwd; cat note.txt'
	ses_ok '"job" in d'
	ses_op a 'wait 0 5000'
	ses_ok 'd["ended"] is True'
	ses_op a 'read 0 0'
	ses_ok "d['stdout'] == '$WS/sub/dir\\nmade-inside\\n' and d['exit_code'] == 0"
	ses_op a info
	ses_ok 'd["commands"] == 4 and d["restarts"] == 0 and d["alive"] is True and d["shell"] == "bash"'
	ses_close a
}

# A file that writes TEXT (a printf format) to every pipe PID holds open for writing above
# fd 2: the shell's status descriptor included, however the shell has renumbered it.
ses_spoof_script() {
	cat >"$WS/spoof.sh" <<'EOF'
pid=$1 n=0
for f in /proc/$pid/fd/*; do
	fd=${f##*/}
	[ "$fd" -gt 2 ] || continue
	case $(readlink "$f") in pipe:*) ;; *) continue ;; esac
	case $(sed -n 's/^flags:[[:space:]]*//p' "/proc/$pid/fdinfo/$fd") in *1) ;; *) continue ;; esac
	printf "$2" >"$f" 2>/dev/null && n=$((n + 1))
done
echo "spoofed=$n"
EOF
}

# Output that looks like status lines ("<24 hex> 0"), and attempts to write to fd 3, neither
# end the command early nor leak into the next command.
test_session_marker_spoofing() {
	ses_spoof_script
	ses_open a
	ses_exec a 0 'export KEEP=kept'
	ses_exec a 10000 'for i in 1 2 3; do printf "%024x 0\n" $i; printf "%024x 0\n" $i >&2; done
printf "0123456789abcdef01234567 0"
echo; echo "$(printf %024x 9) 0" >&3; echo "fd3=$?"
echo "$(printf %024x 8) 0" >/proc/$$/fd/3; echo "proc-fd3=$?"
sleep 0.4
printf "%024x 0\n" 4
echo end; (exit 5)'
	ses_ok 'r["exit_code"] == 5 and not r["timed_out"] and r["session"]["restarted"] is False' "ran to its own end"
	ses_ok 'r["duration_ms"] >= 400' "it did not end at a fake status line"
	ses_ok 'so.startswith(b"000000000000000000000001 0\n") and so.endswith(b"000000000000000000000004 0\nend\n")'
	ses_ok 'b"fd3=1\n" in so and b"proc-fd3=1\n" in so' "fd 3 is not open in the command"
	ses_ok 'se.count(b" 0\n") == 3'
	# a complete status line with a wrong nonce, written into the status pipe itself
	ses_exec a 10000 "sh spoof.sh \$\$ '$(printf %024x 7) 0\n'; echo after-spoof"
	ses_ok 'r["exit_code"] == 0 and not r["timed_out"] and r["session"]["restarted"] is False'
	ses_ok 'so.startswith(b"spoofed=") and so.endswith(b"after-spoof\n") and so[8:9] != b"0"' "the spoof reached the status pipe"
	# the next command's output is exactly its own, and the state is intact
	ses_exec a 5000 'echo "next $KEEP"'
	ses_ok 'so == b"next kept\n" and se == b"" and r["exit_code"] == 0 and not r["timed_out"]'
	ses_close a
}

# A fragment without a newline written into the status pipe (the shell keeps a copy of fd 3
# while the command runs) must not corrupt the real status line that follows it.
test_session_status_fragment_spoof() {
	ses_spoof_script
	ses_open a
	ses_exec a 0 'export KEEP=kept'
	ses_exec a 3000 'sh spoof.sh $$ "half-a-line"; echo done'
	ses_ok 'so.startswith(b"spoofed=") and so[8:9] != b"0"' "the spoof reached the status pipe"
	ses_ok 'not r["timed_out"] and r["exit_code"] == 0 and r["session"]["restarted"] is False' \
		"a fragment in the status pipe made the command hang until its timeout"
	ses_exec a 5000 'echo "next $KEEP"'
	ses_ok 'so == b"next kept\n" and r["exit_code"] == 0' "state lost after the spoof"
	ses_close a
}

# stdin is /dev/null: readers get EOF at once and never see the next command.
test_session_stdin_gets_eof() {
	ses_open a
	ses_exec a 5000 'read x; echo "rc=$? x=[$x]"; cat; echo "cat=$?"; head -c 10 | wc -c'
	ses_ok 'so == b"rc=1 x=[]\ncat=0\n0\n" and r["exit_code"] == 0 and not r["timed_out"]'
	ses_ok 'r["duration_ms"] < 2000'
	# a reader left in the background, still reading when the next command arrives
	ses_exec a 5000 '(sleep 0.3; read line; echo "bg-read=$? [$line]" >bg.txt; cat >>bg.txt) &'
	ses_ok 'r["exit_code"] == 0'
	ses_exec a 5000 'sleep 0.8; echo after'
	ses_ok 'so == b"after\n" and se == b"" and r["exit_code"] == 0'
	# (written 0.3 s into the command before; a slow machine may take longer)
	for _ in $(seq 1 100); do [ -s "$WS/bg.txt" ] && break; sleep 0.05; done
	assert_eq "$(cat "$WS/bg.txt")" "bg-read=1 []"
	ses_exec a 5000 'echo third'
	ses_ok 'so == b"third\n"'
	ses_close a
}

test_session_binary_output_exact() {
	ses_open a
	ses_exec a 0 "printf 'a\\000b\\377c\\000'; printf '\\377\\000\\376' >&2"
	ses_ok 'so == b"a\x00b\xffc\x00" and se == b"\xff\x00\xfe"'
	ses_ok 'r["stdout_bytes"] == 6 and r["stderr_bytes"] == 3'
	ses_exec a 0 "printf 'no-newline'"
	ses_ok 'so == b"no-newline" and se == b""'
	# a UTF-8 sequence cut short at the end, and valid multibyte text
	ses_exec a 0 "printf 'caf\\303\\251 \\342\\202'"
	ses_ok 'so == b"caf\xc3\xa9 \xe2\x82"'
	ses_exec a 0 "head -c 300000 /dev/urandom >rand.bin; cat rand.bin"
	ses_ok 'r["stdout_bytes"] == 300000 and r["stdout_truncated"] is False'
	python3 -c 'import sys; d=bytes.fromhex(sys.stdin.read().strip()); sys.exit(d != open(sys.argv[1], "rb").read())' \
		"$WS/rand.bin" < <(jget stdout_hex <<<"$SES_R") || fail "random bytes came back altered"
	ses_close a
}

# A timeout interrupts the command and keeps the shell: SIGINT to a sleep (with a unique
# marker, gone from the host afterwards) and to a builtin loop in the shell itself.
test_session_timeout_keeps_session() {
	local m
	m=$(ses_mark)
	ses_open a
	ses_exec a 0 'export KEEP=kept; cd /tmp'
	ses_exec a 1000 "sleep 100.$m"
	ses_ok 'r["timed_out"] is True and r["limit"] == "timeout" and r["session"]["restarted"] is False and r["session"]["ended"] is False'
	ses_ok 'r["exit_code"] == 130 and 900 <= r["duration_ms"] < 3000'
	assert_no_survivor "sleep 100.$m"
	ses_exec a 5000 'echo "k=$KEEP p=$PWD"'
	ses_ok 'so == b"k=kept p=/tmp\n" and r["exit_code"] == 0 and not r["timed_out"]'
	ses_exec a 1000 'while :; do :; done'
	ses_ok 'r["timed_out"] is True and r["limit"] == "timeout" and r["session"]["restarted"] is False'
	ses_ok 'r["exit_code"] == 130 and 900 <= r["duration_ms"] < 3000'
	ses_exec a 5000 'echo "k=$KEEP"'
	ses_ok 'so == b"k=kept\n" and r["exit_code"] == 0'
	ses_op a info
	ses_ok 'd["restarts"] == 0 and d["alive"] is True'
	ses_close a
	assert_no_survivor "sleep 100.$m"
}

# A foreground program that ignores SIGINT is killed after the grace period; the shell, which
# did stop, keeps its state (no restart).
test_session_timeout_kills_sigint_ignoring_child() {
	local m
	m=$(ses_mark)
	ses_open a
	ses_exec a 0 'export KEEP=kept'
	ses_exec a 1000 "python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(100)' $m"
	ses_ok 'r["timed_out"] is True and r["limit"] == "timeout" and r["session"]["restarted"] is False and r["session"]["ended"] is False'
	ses_ok 'r["duration_ms"] < 3000'
	assert_no_survivor "$m"
	ses_exec a 5000 'echo "k=$KEEP"'
	ses_ok 'so == b"k=kept\n" and r["exit_code"] == 0'
	ses_op a info
	ses_ok 'd["restarts"] == 0'
	ses_close a
}

# The result's timeout violation names the command's own timeout, not the session default.
test_session_timeout_violation_names_exec_timeout() {
	ses_open a
	ses_exec a 700 'sleep 30'
	ses_ok 'r["timed_out"] is True'
	ses_ok 'any(v["kind"] == "timeout" and v["object"] == "700 ms" for v in r["violations"])' \
		"a timeout violation for the 700 ms exec timeout"
	ses_close a
}

# A shell that ignores SIGINT and loops in itself is wedged: the session restarts, its state
# is gone, the next command works, and nothing of the old shell survives.
test_session_wedged_shell_restarts() {
	local m
	m=$(ses_mark)
	ses_open a
	ses_exec a 0 'export KEEP=kept'
	ses_exec a 500 "sleep 99.$m & trap '' INT; while :; do :; done"
	ses_ok 'r["timed_out"] is True and r["limit"] == "timeout" and r["session"]["restarted"] is True and r["session"]["ended"] is False'
	ses_ok 'r["duration_ms"] < 5000'
	assert_no_survivor "sleep 99.$m"
	ses_exec a 5000 'echo "k=${KEEP:-}"'
	ses_ok 'so == b"k=\n" and r["exit_code"] == 0 and r["session"]["restarted"] is False'
	ses_op a info
	ses_ok 'd["restarts"] == 1 and d["alive"] is True'
	ses_close a
}

# The shell exits: the command's status is the result, the session is over, and a later
# command fails clearly. Its background processes do not outlive it.
test_session_exit_ends_session() {
	local m
	m=$(ses_mark)
	ses_open a
	ses_exec a 5000 "sleep 98.$m & exit 3"
	ses_ok 'r["exit_code"] == 3 and r["session"]["ended"] is True and r["session"]["restarted"] is False'
	assert_no_survivor "sleep 98.$m"
	ses_op a 'exec 0 echo after'
	ses_ok '"error" in d and "has ended" in d["error"] and "open a new session" in d["error"]'
	ses_op a info
	ses_ok 'd["alive"] is False'
	ses_op a 'job echo x'
	ses_ok '"error" in d and "ended" in d["error"]'
	ses_close a
}

# A server started as a job of the session is reachable from the session's commands (its
# loopback) and from nowhere else: not from the host, not from another session.
test_session_job_http_server() {
	local port mark
	port=$(ses_free_port)
	mark="http.server $port --bind"
	cat >"$WS/get.py" <<'EOF'
import sys, time, urllib.request
url, tries = "http://127.0.0.1:%s/" % sys.argv[1], int(sys.argv[2])
for i in range(tries):
    try:
        print(urllib.request.urlopen(url, timeout=2).status)
        break
    except OSError as e:
        err = e
        time.sleep(0.05)
else:
    print("unreachable: %s" % err)
EOF
	ses_open a
	ses_exec a 0 'true'
	[ "$(ses_get result.isolation.netns.applied)" = true ] || skip "no network namespace: $(ses_get result.isolation.netns.detail)"
	ses_op a "job python3 -m http.server $port --bind 127.0.0.1"
	ses_ok 'd.get("job") == 0' "job started"
	ses_exec a 10000 "python3 get.py $port 100"
	ses_ok 'so == b"200\n"' "the session reaches its job's server"
	# the host cannot: the server lives in the sandbox's network namespace
	local host
	host=$(python3 -c 'import socket, sys
s = socket.socket(); s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1]))); print("connected")
except OSError as e:
    print("refused: %s" % e)' "$port")
	assert_contains "$host" refused
	pgrep -f -- "$mark" >/dev/null || fail "the job's server is not running on the host"
	# nor can another session
	ses_open b
	ses_exec b 10000 "python3 get.py $port 3"
	ses_ok 'so.startswith(b"unreachable")' "a second session reached the first one's server"
	ses_close b
	# output by offset: the request log line arrives on stderr
	local next1 next2
	for _ in $(seq 1 50); do
		ses_op a 'sleep 50'
		ses_op a 'read 0 0'
		ses_true '"200 -\n" in d["stderr"]' && break
	done
	ses_ok '"\"GET / HTTP/1.1\" 200 -" in d["stderr"] and d["from"] == 0 and d["next"] > 0 and d["missed"] == 0 and d["running"] is True'
	next1=$(ses_get next)
	ses_exec a 10000 "python3 get.py $port 100"
	ses_ok 'so == b"200\n"'
	for _ in $(seq 1 50); do
		ses_op a 'sleep 50'
		ses_op a "read 0 $next1"
		ses_true '"200 -\n" in d["stderr"]' && break
	done
	ses_ok "d['from'] == $next1 and d['next'] > $next1 and d['stderr'].count('GET /') == 1"
	next2=$(ses_get next)
	ses_op a "read 0 $next2"
	ses_ok "d['from'] == $next2 and d['next'] == $next2 and d['stdout'] == '' and d['stderr'] == ''" "nothing new"
	ses_op a info
	ses_ok 'd["jobs"] == 1'
	# kill: SIGTERM to its process group, then it has ended and is gone from the host
	ses_op a 'kill 0 500'
	ses_ok 'd["kill"] == 0'
	ses_op a 'wait 0 3000' 10
	ses_ok 'd["ended"] is True'
	ses_op a 'read 0 0'
	ses_ok 'd["running"] is False and d["signal"] == 15 and d["stderr"].count("GET /") == 2'
	assert_no_survivor "$mark"
	ses_op a info
	ses_ok 'd["jobs"] == 0 and d["alive"] is True'
	ses_exec a 5000 'echo still-here'
	ses_ok 'so == b"still-here\n"'
	ses_close a
	assert_no_survivor "$mark"
}

# What a running job wrote can be read up to its last byte, without waiting for more output:
# a poller sees a server's "ready" line whole, newline included.
test_session_job_output_not_held_back() {
	ses_open a
	ses_op a 'job echo ready; sleep 5'
	ses_op a 'solo echo ready; sleep 5'
	local n
	for n in 0 1; do
		for _ in $(seq 1 20); do
			ses_op a 'sleep 50'
			ses_op a "read $n 0"
			ses_true 'd["stdout"] == "ready\n"' && break
		done
		ses_ok 'd["stdout"] == "ready\n" and d["total"] == 6 and d["running"] is True' \
			"job $n: its output so far, whole, while it runs"
	done
	ses_close a
}

# Jobs in a sandbox of their own: streams apart, exit status, and a ring that overflows.
test_session_solo_jobs() {
	local m
	m=$(ses_mark)
	ses_open a --cap 65536
	ses_op a 'solo echo out; echo err >&2; echo out2; exit 4'
	ses_ok 'd.get("job") == 0'
	ses_op a 'wait 0 10000' 15
	ses_ok 'd["ended"] is True'
	ses_op a 'read 0 0'
	ses_ok 'd["stdout"] == "out\nout2\n" and d["stderr"] == "err\n" and d["exit_code"] == 4 and d["running"] is False'
	ses_ok 'd["total"] == 13 and d["next"] == 13 and d["dropped"] == 0 and d["missed"] == 0'
	ses_op a 'solo head -c 3145728 /dev/zero | tr "\0" a; echo tail-end'
	ses_op a 'wait 1 15000' 20
	ses_ok 'd["ended"] is True'
	ses_op a 'read 1 0'
	ses_ok 'd["total"] == 3145728 + 9 and d["dropped"] > 0 and d["missed"] > 0 and d["from"] > 0' "ring overflow"
	ses_ok 'd["missed"] == d["from"] and d["next"] == d["total"] and len(d["stdout"]) == d["total"] - d["from"] <= 65536'
	ses_ok 'd["stdout"].endswith("aaaatail-end\n") and d["exit_code"] == 0'
	# a solo job is killed like a session job, and leaves nothing behind
	ses_op a "solo exec sleep 97.$m"
	for _ in $(seq 1 30); do
		ses_op a 'sleep 100'
		pgrep -f -- "sleep 97.$m" >/dev/null && break
	done
	pgrep -f -- "sleep 97.$m" >/dev/null || fail "the solo job is not running"
	ses_op a 'kill 2 300'
	ses_op a 'wait 2 5000' 10
	ses_ok 'd["ended"] is True'
	ses_op a 'read 2 0'
	ses_ok 'd["running"] is False and (d["signal"] in (9, 15))'
	assert_no_survivor "sleep 97.$m"
	ses_close a
}

test_session_output_budget() {
	ses_open a --budget 20000
	ses_exec a 5000 'echo small'
	ses_ok 'so == b"small\n"'
	ses_exec a 10000 'head -c 20000000 /dev/zero | tr "\0" x; echo done'
	ses_ok 'r["limit"] == "output" and r["session"]["ended"] is True' "the output budget ends the session"
	ses_ok 'r["stdout_bytes"] < 20000000 and b"done" not in so' "stopped when the budget was spent"
	# and nothing past the budget is kept (the supervisor reads on until the stop lands): the
	# budget less the first command's 6 bytes, marked truncated (stdout_bytes still counts
	# what was read)
	ses_ok '19000 <= len(so) <= 20000 - 6 and r["stdout_truncated"] is True' "kept $(ses_get result.stdout_bytes) bytes"
	ses_ok 'r["duration_ms"] < 5000'
	ses_op a 'exec 0 echo after'
	ses_ok '"error" in d and "output budget" in d["error"]'
	ses_close a
	# a secret across the budget's edge: cut after redaction, so no part of it is let out
	local tok=ghp_1234567890abcdefghijklmnopqrstuvwxyz
	ses_open b --budget 100
	ses_exec b 10000 "printf '%080d $tok tail' 0"
	ses_ok 'r["limit"] == "output" and len(so) <= 100 and r["stdout_truncated"] is True'
	ses_ok 'b"1234567890" not in so and so.startswith(b"0" * 80)' "the token's start was let out"
	ses_ok 'r["redactions"]["count"] >= 1 and "github" in r["redactions"]["kinds"]'
	ses_close b
}

# The CPU budget is the whole session's: a busy loop in the shell, and commands that each
# stay under it but spend it together.
test_session_cpu_budget() {
	ses_open a --cpu 1
	ses_exec a 10000 'while :; do :; done'
	ses_ok 'r["limit"] == "cpu" and r["session"]["ended"] is True and not r["timed_out"]'
	ses_ok 'r["duration_ms"] < 4000' "ended within a few seconds"
	ses_op a 'exec 0 echo after'
	ses_ok '"error" in d and "has ended" in d["error"]'
	ses_close a
	ses_open b --cpu 1
	# 0.7 s of CPU each (CPU time, not wall time: a loaded machine gives a loop less than a core)
	local burn='python3 -c "import time, itertools; any(time.process_time() >= 0.7 for _ in itertools.count())"; echo "rc=$?"'
	ses_exec b 10000 "$burn"
	ses_ok 'so == b"rc=0\n" and r["limit"] is None and r["session"]["ended"] is False'
	ses_exec b 10000 "$burn"
	ses_ok 'r["limit"] == "cpu" and r["session"]["ended"] is True' "1.4 s of CPU over two commands"
	ses_op b 'exec 0 echo after'
	ses_ok '"error" in d and "CPU budget" in d["error"]'
	ses_close b
}

# The memory limit: with a cgroup (root here) the kernel kills the allocation and the result
# says limit memory; with the rlimit fallback (no delegated cgroup, as an unprivileged user)
# the allocation fails inside and the session goes on.
test_session_memory_limit() {
	local m
	m=$(ses_mark)
	ses_open a --memory 67108864
	ses_exec a 0 'export KEEP=kept'
	ses_exec a 10000 "python3 -c 'b = bytearray(256 << 20); print(\"allocated\")' $m"
	ses_ok 'b"allocated" not in so'
	if [ "$(ses_get result.isolation.cgroup.applied)" = true ]; then
		ses_ok 'r["limit"] == "memory"' "the cgroup's OOM kill is reported as limit memory"
		if [ "$(ses_get result.session.ended)" = false ]; then
			ses_exec a 5000 'echo "k=$KEEP"'
			ses_ok 'so == b"k=kept\n"'
		fi
	else
		assert_contains "$(ses_get result.isolation.rlimits.detail)" "data (memory fallback)"
		ses_ok 'b"MemoryError" in se and r["exit_code"] == 1 and r["limit"] is None and r["session"]["ended"] is False'
		ses_exec a 5000 'echo "k=$KEEP"'
		ses_ok 'so == b"k=kept\n"'
	fi
	assert_no_survivor "$m"
	ses_close a
}

# The POSIX sh fallback keeps state and survives a timeout the same way.
test_session_sh_fallback() {
	local m
	m=$(ses_mark)
	mkdir -p "$WS/sub"
	ses_open a --shell sh --startup 3000
	ses_op a info
	ses_ok 'd["shell"] == "sh"'
	ses_exec a 0 'cd sub && export GREETING=hi && greet() { echo "fn-$1"; } && echo data >f.txt'
	ses_ok 'r["exit_code"] == 0 and se == b""'
	ses_exec a 0 'echo "p=$(pwd) g=$GREETING"; greet ok; cat f.txt'
	ses_ok "so == b'p=$WS/sub g=hi\\nfn-ok\\ndata\\n'"
	assert_eq "$(cat "$WS/sub/f.txt")" data
	ses_exec a 1000 "sleep 100.$m"
	ses_ok 'r["timed_out"] is True and r["limit"] == "timeout" and r["session"]["restarted"] is False'
	assert_no_survivor "sleep 100.$m"
	ses_exec a 1000 'while :; do :; done'
	ses_ok 'r["timed_out"] is True and r["session"]["restarted"] is False'
	ses_exec a 5000 'echo "g=$GREETING"; read x; echo "rc=$?"'
	ses_ok 'so == b"g=hi\nrc=1\n"'
	ses_close a
}

# Redaction of job rings (issue 7): one redaction stream per job stream for the job's life. A
# token cut by a pause far longer than the ring's idle release (100 ms) must not come out
# half: its start is held, the rest of the output still flows, and the whole token is
# redacted and counted; no read along the way shows any of it.
test_session_job_split_secret_redacted() {
	local n tok=ghp_1234567890abcdefghijklmnopqrstuvwxyz
	ses_open a
	ses_op a "job printf 'tok ${tok:0:18}'; sleep 0.5; printf '${tok:18} end\n'; sleep 5"
	ses_op a "solo printf 'tok ${tok:0:18}'; sleep 0.5; printf '${tok:18} end\n'; sleep 5"
	for n in 0 1; do
		for _ in $(seq 1 60); do
			ses_op a 'sleep 50'
			ses_op a "read $n 0"
			ses_ok '"ghp_" not in d["stdout"] and "1234567890" not in d["stdout"]' \
				"job $n: no part of the token in a read during the pause"
			ses_true '"end" in d["stdout"]' && break
		done
		ses_ok 'd["stdout"] == "tok [REDACTED:github] end\n" and d["running"] is True' \
			"job $n: the split token redacted whole"
		ses_ok 'd["redactions"] == {"mode": "redact", "count": 1, "kinds": {"github": 1}}' \
			"job $n: the redaction counted in the job's output"
	done
	ses_close a
}

# The same split in a session command, in its result and in what its output callback streamed
# (released after a pause, never the token's start).
test_session_exec_split_secret_redacted() {
	local tok=ghp_1234567890abcdefghijklmnopqrstuvwxyz live
	ses_open a --stream "$WS/.st/live"
	ses_exec a 10000 "printf 'tok ${tok:0:18}'; sleep 0.5; printf '${tok:18} end\n'"
	ses_ok 'so == b"tok [REDACTED:github] end\n"' "the split token redacted whole"
	ses_ok 'r["redactions"]["count"] == 1 and r["redactions"]["kinds"] == {"github": 1}'
	live=$(cat "$WS/.st/live")
	assert_eq "$live" "tok [REDACTED:github] end" "what the callback streamed"
	ses_close a
}
