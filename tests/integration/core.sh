# Core: launch, supervision, limits, result and CLI behaviour (issue: core).

test_core_exit_status_passthrough() {
	cr -- sh -c 'exit 3'; assert_eq $? 3
	cr -- true; assert_eq $? 0
	cr -- false; assert_eq $? 1
}

test_core_exit_not_found_127() {
	local err
	err=$(cr -- no-such-command-xyz 2>&1 >/dev/null); assert_eq $? 127
	assert_contains "$err" "no-such-command-xyz"
	assert_contains "$err" "not found"
}

test_core_exit_not_executable_126() {
	printf 'data\n' >"$WS/notexec"; chmod 644 "$WS/notexec"
	cr -- ./notexec 2>/dev/null; assert_eq $? 126
	cr -- /etc/passwd 2>/dev/null; assert_eq $? 126
}

# The exec's failures named by their cause: a script there whose interpreter is not (126, as
# a shell says "bad interpreter"; a CRLF #! line is the usual way to get one), found through
# PATH too. (Arguments over the kernel's limit: test_mcp_protocol_errors_keep_serving, since the
# host could not pass them to corral run either.)
test_core_exec_failure_names_the_cause() {
	local err
	printf '#!/bin/sh\r\necho hi\r\n' >"$WS/crlf.sh"; chmod 755 "$WS/crlf.sh"
	err=$(cr -- ./crlf.sh 2>&1 >/dev/null); assert_eq $? 126
	assert_contains "$err" "./crlf.sh: its interpreter was not found in the sandbox"
	mkdir -p "$WS/bin"; printf '#!/no/such/interp\n' >"$WS/bin/noint"; chmod 755 "$WS/bin/noint"
	err=$(cr --env "PATH=$WS/bin:/usr/bin:/bin" -- noint 2>&1 >/dev/null); assert_eq $? 126
	assert_contains "$err" "noint: its interpreter was not found"
	err=$(cr -- no-such-command-xyz 2>&1 >/dev/null); assert_eq $? 127
	assert_contains "$err" "command not found in the sandbox"
}

test_core_exit_signal_128_plus_n() {
	cr -- sh -c 'kill -KILL $$'; assert_eq $? 137
	cr -- sh -c 'kill -TERM $$'; assert_eq $? 143
	local out
	out=$(cr --json -- sh -c 'kill -SEGV $$')
	assert_eq "$(jget signal <<<"$out")" 11
	assert_eq "$(jget signal_name <<<"$out")" SEGV
	assert_eq "$(jget exit_code <<<"$out")" null
}

# The caller's signal dispositions stop at the sandbox: a command started from a shell that
# ignores SIGHUP, SIGINT and SIGPIPE (nohup, a background job, a server that ignores SIGPIPE)
# starts with every disposition at its default and nothing blocked, so `yes | head` ends and
# Ctrl-C works inside. Positive control: the caller's own mask shows what it ignores.
test_core_signal_dispositions_reset() {
	local out
	out=$(python3 -c '
import os, signal, sys
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
print(open("/proc/self/status").read().split("SigIgn:")[1].split()[0], flush=True)
os.execv(sys.argv[1], sys.argv[1:])' "$CORRAL" run -w "$WS" -- sh -c \
		'grep -E "^Sig(Ign|Blk):" /proc/self/status; yes | head -1 >/dev/null; echo "yes: $?"')
	local host
	host=$(head -1 <<<"$out")
	[ "$host" != 0000000000000000 ] || fail "control: the caller ignores nothing ($out)"
	assert_contains "$out" "SigIgn:	0000000000000000"
	assert_contains "$out" "SigBlk:	0000000000000000"
	assert_contains "$out" "yes: 0"
}

# The init builds the sandbox on another CPU than the supervisor's (launch_start), and takes
# the caller's CPU set back before the command starts: the command, a process it starts, and
# the init itself have the caller's set, in every tier, whatever that set is. With the set not
# taken back, the command runs on the one CPU the setup was moved to.
test_core_command_keeps_caller_cpu_set() {
	local want out cpus
	want=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
	out=$(cr -- sh -c 'grep Cpus_allowed_list /proc/self/status /proc/1/status; sh -c "grep Cpus_allowed_list /proc/self/status"')
	assert_eq "$(cut -f2 <<<"$out" | sort -u)" "$want"
	assert_eq "$(wc -l <<<"$out")" 3
	out=$(cr --mode none -- grep Cpus_allowed_list /proc/self/status)
	assert_eq "$(cut -f2 <<<"$out")" "$want"
	# a narrower set than the machine's: the caller's, not the machine's
	cpus=$(nproc)
	if [ "$cpus" -ge 2 ]; then
		out=$(taskset -c 1 "$CORRAL" run -w "$WS" -- grep Cpus_allowed_list /proc/self/status)
		assert_eq "$(cut -f2 <<<"$out")" 1
		out=$(taskset -c 0,1 "$CORRAL" run -w "$WS" -- grep Cpus_allowed_list /proc/self/status)
		assert_eq "$(cut -f2 <<<"$out")" 0-1
	fi
}

test_core_shell_string_and_argv() {
	local out
	out=$(cr -c 'echo "a b" | tr a-z A-Z')
	assert_eq "$out" "A B"
	out=$(cr -- printf '%s|' 'x y' z)
	assert_eq "$out" "x y|z|"
	out=$(cr --json -c 'true')
	assert_eq "$(jget command <<<"$out")" "true"
	assert_eq "$(jget argv.0 <<<"$out")" "/bin/sh"
}

test_core_stdout_stderr_separate() {
	local out
	out=$(cr --json -c 'echo to-out; echo to-err >&2')
	python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["stdout"]=="to-out\n" and d["stderr"]=="to-err\n", d' <<<"$out" || fail "streams mixed"
	# live passthrough keeps the streams apart too
	local so se
	so=$(cr -c 'echo A; echo B >&2' 2>"$WS/.err")
	se=$(cat "$WS/.err")
	assert_eq "$so" A
	assert_eq "$se" B
}

# corral relays the command's output; when its own reader goes away (the usual end of a
# pipeline), the command must get EPIPE/SIGPIPE as it would without corral in between, not run
# on (into discarded output) until its timeout. Host-side: the pipeline ends well before the
# timeout, corral exits like the command did (141, as bare `yes | head -1`), and no `yes`
# survives.
test_core_stdout_reader_gone_sigpipe() {
	local mark="corral-yes-$RANDOM$RANDOM" start end rc
	start=$(date +%s%N)
	"$CORRAL" run -w "$WS" --timeout 60 -- bash -c "exec -a $mark yes" | head -1 >"$WS/.first"
	rc=${PIPESTATUS[0]}
	end=$(date +%s%N)
	assert_eq "$(cat "$WS/.first")" y
	assert_eq "$rc" 141 "corral's status: the command's SIGPIPE"
	[ $(((end - start) / 1000000)) -lt 20000 ] ||
		fail "the pipeline took $(((end - start) / 1000000)) ms: the command ran on"
	assert_no_survivor "$mark"
	# stderr too, and the other stream goes on: the shell outlives its writer's SIGPIPE
	local out
	out=$("$CORRAL" run -w "$WS" --timeout 60 -- sh -c 'yes >&2; echo after' 2>&1 >"$WS/.out" | head -c 4)
	assert_eq "$out" "y
y"
	assert_eq "$(cat "$WS/.out")" after
}

# A reader that stays but takes nothing holds the command back, as a pipe would, and not the
# run's deadlines: the command is gone at its timeout (and grace) while the reader still takes
# nothing; once the reader reads, it gets whole lines in order and corral ends with 124. Before
# the relay kept its deadlines, corral blocked in write(2) and the command ran on for as long
# as the reader slept. The same for a pipeline's last stage.
test_core_stalled_reader_keeps_timeout() {
	local mark="corral-yes-$RANDOM$RANDOM"
	CORRAL="$CORRAL" WS="$WS" MARK="$mark" python3 - <<'PY' || fail "stalled reader (see above)"
import os, signal, subprocess, sys, time

def alive(mark):
    return subprocess.run(["pgrep", "-f", "--", mark], stdout=subprocess.DEVNULL).returncode == 0

# the mark is put together inside the sandbox, so that only the command's own argv (not
# corral's, which stays to write what is left) carries it
corral, ws, mark = os.environ["CORRAL"], os.environ["WS"], os.environ["MARK"]
tag = mark.split("-")[-1]
for argv in ([corral, "run", "-w", ws, "--timeout", "2", "--kill-after", "1", "--",
              "bash", "-c", 'exec -a "corral-yes-$0" yes', tag],
             [corral, "run", "-w", ws, "--timeout", "2", "--kill-after", "1",
              "--pipe", f"bash -c 'exec -a \"corral-yes-$0\" yes' {tag}", "--pipe", "cat"]):
    r, w = os.pipe()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    time.sleep(1)
    if not alive(mark):
        sys.exit(f"{argv}: the command never ran")
    # nothing is read: the command must still end at 2 s + 1 s of grace
    while alive(mark) and time.monotonic() - t0 < 15:
        time.sleep(0.1)
    gone = time.monotonic() - t0
    if alive(mark):
        sys.exit(f"the command outlived its timeout by far ({gone:.1f} s) behind a stalled reader")
    if gone > 8:
        sys.exit(f"the command ended {gone:.1f} s after the start, its deadline was 3 s")
    if p.poll() is not None and p.returncode != 124:
        sys.exit(f"corral ended early with {p.returncode} before its output was read")
    data = b""
    while True:
        b = os.read(r, 1 << 20)
        if not b:
            break
        data += b
    os.close(r)
    err = p.stderr.read().decode()
    rc = p.wait(timeout=30)
    if rc != 124:
        sys.exit(f"status {rc}, expected 124 (timed out); stderr: {err}")
    if "timed out" not in err:
        sys.exit(f"no timeout message: {err}")
    body = data[:len(data) - len(data) % 2]
    if len(data) < 65536 or body != b"y\n" * (len(body) // 2):
        sys.exit(f"{len(data)} bytes, not whole 'y' lines in order: {data[:64]!r}")
    what = "pipeline" if "--pipe" in argv else "run"
    print(f"ok: {what}: command gone after {gone:.1f} s, {len(data)} bytes read late")

# Ctrl-C with a stalled reader: the run is cancelled, and corral does not wait for the reader
# to take what is left: it says how much it dropped and ends (128+N: the cancel's kill)
r, w = os.pipe()
p = subprocess.Popen([corral, "run", "-w", ws, "--timeout", "60", "--kill-after", "1", "--",
                      "bash", "-c", 'exec -a "corral-yes-$0" yes', tag],
                     stdout=w, stderr=subprocess.PIPE)
os.close(w)
t0 = time.monotonic()
while not alive(mark) and time.monotonic() - t0 < 10:
    time.sleep(0.05)
if not alive(mark):
    sys.exit("Ctrl-C case: the command never ran")
time.sleep(0.5)
t0 = time.monotonic()
p.send_signal(signal.SIGINT)
try:
    rc = p.wait(timeout=15)
except subprocess.TimeoutExpired:
    p.kill()
    sys.exit("Ctrl-C: corral still waits for a reader that takes nothing, 15 s on")
err = p.stderr.read().decode()
os.close(r)
if rc <= 128:
    sys.exit(f"Ctrl-C: status {rc}, expected 128+N; stderr: {err}")
if "were not written" not in err:
    sys.exit(f"Ctrl-C: what was dropped is not said: {err}")
if alive(mark):
    sys.exit("Ctrl-C: the command survived")
print(f"ok: Ctrl-C: corral ended {time.monotonic() - t0:.1f} s after it, status {rc}")
PY
	assert_no_survivor "$mark"
}

# A cancelled run says so: SIGTERM to corral run is a cancel ("cancelled": true, the signal
# it ended by), not the command's own death; a run that ends by itself, or by the timeout,
# is not cancelled.
test_core_cancelled_run_says_so() {
	"$CORRAL" run -w "$WS" --json -- sleep 30 >"$WS/.c.json" 2>/dev/null &
	local pid=$! i
	for i in $(seq 1 100); do
		pgrep -f -- "^sleep 30" >/dev/null && break
		sleep 0.05
	done
	kill -TERM $pid
	wait $pid
	assert_eq $? 143
	assert_eq "$(jget cancelled <"$WS/.c.json")" true
	assert_eq "$(jget signal <"$WS/.c.json")" 15
	assert_eq "$(jget timed_out <"$WS/.c.json")" false
	local out
	out=$(cr --json -- sh -c 'kill -TERM $$')
	assert_eq "$(jget cancelled <<<"$out")" false "the command's own SIGTERM"
	out=$(cr --json -t 0.2 -- sleep 5)
	assert_eq "$(jget cancelled <<<"$out")" false "the timeout's stop"
}

# Output that cannot be written (a full disk) is said once, by name, and stops the command's
# writes the same way; a --json result that cannot be written is corral's failure (125) and
# the message keeps the command's own status.
test_core_unwritable_output_reported() {
	local err rc
	err=$(timeout 30 "$CORRAL" run -w "$WS" --timeout 60 -- yes 2>&1 >/dev/full)
	rc=$?
	assert_eq "$rc" 141 "the command's write failed instead of running on"
	assert_contains "$err" "cannot write the command's stdout: No space left on device"
	assert_eq "$(grep -c 'cannot write' <<<"$err")" 1 "said once"
	err=$("$CORRAL" run -w "$WS" --json -- sh -c 'exit 3' 2>&1 >/dev/full)
	rc=$?
	assert_eq "$rc" 125
	assert_contains "$err" "cannot write the JSON result to stdout: No space left on device"
	assert_contains "$err" "the command's exit status was 3"
	# control: the same run with somewhere to write keeps the command's status
	"$CORRAL" run -w "$WS" --json -- sh -c 'exit 3' >/dev/null 2>&1
	assert_eq $? 3
	# a pipeline's --json result alike (it was printed with an unchecked puts: exit 0)
	err=$("$CORRAL" run -w "$WS" --json --pipe 'echo hi' --pipe cat 2>&1 >/dev/full)
	assert_eq $? 125
	assert_contains "$err" "cannot write the JSON result to stdout: No space left on device"
}

# A caller's stdout that is non-blocking (inherited O_NONBLOCK, as some process managers
# leave it) and full is waited for: every byte arrives, the command is not cut off. A stdout
# or stdin that is not open at all becomes /dev/null for corral, so nothing it opens later
# (its signalfd, the audit store) takes that number and receives the command's output.
test_core_caller_stdout_nonblocking_and_closed() {
	CORRAL="$CORRAL" WS="$WS" python3 - <<'PY' || fail "non-blocking stdout (see above)"
import fcntl, os, subprocess, time
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen([os.environ["CORRAL"], "run", "-w", os.environ["WS"], "--",
                      "head", "-c", "2000000", "/dev/zero"], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(0.5)  # the pipe fills while nobody reads
got = 0
while True:
    b = os.read(r, 65536)
    if not b:
        break
    got += len(b)
    time.sleep(0.001)
rc = p.wait()
err = p.stderr.read()
assert (got, rc) == (2000000, 0), (got, rc, err)
assert err == b"", err

# the --json result alike, for one command and for a pipeline: larger than the pipe, into a
# full non-blocking stdout (stdio gave up with EAGAIN: exit 125, the result lost)
import json
for tail in (["--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; exit 3"],
             ["--pipe", "head -c 300000 /dev/zero", "--pipe", "tr '\\0' x"]):
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    p = subprocess.Popen([os.environ["CORRAL"], "run", "-w", os.environ["WS"], "--json"] + tail,
                         stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    # wait until the sandbox has finished and corral is writing into the full pipe
    time.sleep(1.5)
    data = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        data += b
        time.sleep(0.001)
    os.close(r)
    rc = p.wait()
    err = p.stderr.read()
    doc = json.loads(data)
    if tail[0] == "--":
        assert (rc, doc["exit_code"], doc["stdout_bytes"]) == (3, 3, 300000), (rc, err)
    else:
        assert (rc, doc["exit_code"]) == (0, 0), (rc, err)
        assert doc["stages"][-1]["stdout_bytes"] == 300000, doc["stages"][-1]
PY
	local err rc out
	err=$("$CORRAL" run -w "$WS" -- sh -c 'echo out; echo done >&2; exit 4' 2>&1 >&-)
	rc=$?
	assert_eq "$rc" 4
	assert_eq "$err" "done"
	"$CORRAL" run -w "$WS" --json -- sh -c 'exit 5' >&-
	assert_eq $? 5
	out=$("$CORRAL" run -w "$WS" -- sh -c 'cat; echo read-eof' <&-)
	assert_eq $? 0
	assert_eq "$out" "read-eof"
}

# Positive control for the survivor checks: wait (at most 5 s) until at least N processes
# whose command line matches the extended regex PATTERN run on the host, so that "no
# survivor" afterwards is not vacuously true.
await_procs() { # PATTERN N
	local i
	for i in $(seq 1 250); do
		[ "$(pgrep -fc -- "$1")" -ge "$2" ] && return 0
		sleep 0.02
	done
	return 1
}

test_core_timeout_kills_setsid_daemon() {
	local mark="corral-daemon-$RANDOM$RANDOM" start end bg rc
	start=$(date +%s%N)
	# -t 3: the control below must see all three before the deadline, which counts from
	# before the sandbox is built
	cr -t 3 --kill-after 0.2 -- bash -c "setsid bash -c 'exec -a $mark-a sleep 300' & (setsid bash -c 'exec -a $mark-b sleep 301' &) ; exec -a $mark sleep 302" 2>/dev/null &
	bg=$!
	await_procs "^$mark" 3 || { kill -9 $(pgrep -f -- "^$mark") 2>/dev/null; fail "control: the three sleepers did not start: $(pgrep -af -- "$mark")"; }
	wait "$bg"
	rc=$?
	assert_eq $rc 124
	end=$(date +%s%N)
	[ $(((end - start) / 1000000)) -lt 7000 ] || fail "timeout took too long"
	assert_no_survivor "$mark"
}

test_core_timeout_sigterm_ignoring_loop() {
	local out
	# the deadline counts from before the sandbox is built: 1 s, so that the shell has set its
	# trap by then even under ASan beside the other pass (else SIGTERM ends it: signal 15)
	out=$(cr --json -t 1 --kill-after 0.3 -c "trap '' TERM; while :; do :; done")
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget limit <<<"$out")" timeout
	assert_eq "$(jget signal <<<"$out")" 9
	local d; d=$(jget duration_ms <<<"$out")
	[ "$d" -ge 1250 ] && [ "$d" -lt 4000 ] || fail "duration $d ms: the grace period was not honoured"
}

test_core_timeout_kill_reported_without_pidns() {
	# Without a pid namespace (mode none; the no-namespace tier of mode auto) the init finds
	# the command by walking /proc when the supervisor kills; the command's status must still
	# be the one reported (it was reaped by that walk and reported as exit 0).
	# (-t 1: the shell must have set its trap before the deadline, which counts from before
	# the sandbox is built)
	local out how i mark
	for how in none nolayer; do
		for i in 1 2 3; do
			mark="corral-kr-$how-$RANDOM$RANDOM"
			if [ "$how" = none ]; then
				out=$("$CORRAL" run -w "$WS" --audit off --json --mode none -t 1 --kill-after 0.1 -- bash -c "trap '' TERM; exec -a $mark sleep 30")
			else
				out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --audit off --json --mode auto -t 1 --kill-after 0.1 -- bash -c "trap '' TERM; exec -a $mark sleep 30")
				assert_eq "$(jget isolation.pidns.applied <<<"$out")" false
			fi
			assert_eq "$(jget timed_out <<<"$out")" true "$how: $out"
			assert_eq "$(jget signal <<<"$out")" 9 "$how, round $i: the kill was not reported"
			assert_eq "$(jget exit_code <<<"$out")" null "$how, round $i"
			assert_no_survivor "$mark"
		done
	done
}

test_core_no_pidns_run_leaves_no_survivor() {
	# Without a pid namespace the init ends what the command left behind by walking /proc
	# for its children (it is their subreaper), and skips the walk when it has none. What a
	# command that exits by itself leaves must still go: a background job, a double fork
	# (an orphan, which comes to the init), a setsid daemon, and a job whose own child it
	# waits for (a grandchild whose parent lives on). Host-side: none of them survives.
	local how m out
	for how in none nolayer; do
		m="corral-np-$how-$RANDOM$RANDOM"
		local sh="exec -a $m-bg sleep 61 & (exec -a $m-orphan sleep 62 &); setsid bash -c 'exec -a $m-sid sleep 63' & bash -c 'exec -a $m-gc sleep 64 & wait' & sleep 0.3; echo ok"
		if [ "$how" = none ]; then
			out=$("$CORRAL" run -w "$WS" --audit off --json --mode none -t 20 -- bash -c "$sh")
		else
			out=$("$NOLAYER" userns -- "$CORRAL" run -w "$WS" --audit off --json --mode auto -t 20 -- bash -c "$sh")
			assert_eq "$(jget isolation.pidns.applied <<<"$out")" false
		fi
		assert_eq "$(jget exit_code <<<"$out")" 0 "$how: $out"
		assert_eq "$(jget timed_out <<<"$out")" false "$how"
		assert_eq "$(jget stdout <<<"$out")" ok "$how"
		assert_no_survivor "$m-"
	done
}

test_core_timeout_at_the_deadline_is_consistent() {
	# Commands that end right at their deadline: the result must say either that the command
	# ended by itself (exit 0, not timed out) or that the timeout stopped it (SIGTERM, timed
	# out); never "timed out" with the command's own exit 0 (the EXIT report read after the
	# timer, or the stop coming after the command had ended). 40 runs around the boundary.
	local i out to ec sig so
	for i in $(seq 0 39); do
		out=$("$CORRAL" run -w "$WS" --audit off --json -t 0.2 --kill-after 1 -- sh -c "sleep 0.1$((85 + i % 15)); echo done")
		# one JSON read a round (40 rounds; the test has its 60 s on a busy machine too)
		read -r to ec sig so < <(python3 -c 'import json,sys
r=json.load(sys.stdin)
print(*[json.dumps(r.get(k)) for k in ("timed_out","exit_code","signal","stdout")])' <<<"$out")
		if [ "$to" = true ]; then
			assert_eq "$sig" 15 "round $i: timed out, but the command was not stopped (exit $ec)"
		else
			assert_eq "$ec" 0 "round $i: not timed out, so the command ended by itself"
			assert_eq "$so" '"done\n"' "round $i"
		fi
	done
}

test_core_timeout_sigwait_command_timed_out() {
	# A command that waits for SIGTERM as a value (sigwait, as tini and dumb-init do) and
	# exits 0 when it comes: that exit answers the timeout's stop, so the run timed out. The
	# wait unblocks SIGTERM in /proc's SigBlk, so a check of the masks alone would call the
	# exit the command's own. Host-side: the command wrote that it took the signal.
	local out i
	for i in 1 2 3; do
		rm -f "$WS/took"
		# -t 2: python3 must block SIGTERM before the deadline, which counts from before the
		# sandbox is built (else SIGTERM ends it and it never writes "took")
		out=$("$CORRAL" run -w "$WS" --audit off --json -t 2 --kill-after 2 -- python3 -c '
import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
s = signal.sigwait([signal.SIGTERM])
open("took", "w").write(str(int(s)))
sys.exit(0)')
		assert_eq "$(cat "$WS/took" 2>/dev/null)" 15 "round $i: the command did not take SIGTERM: $out"
		assert_eq "$(jget timed_out <<<"$out")" true "round $i: $out"
		assert_eq "$(jget exit_code <<<"$out")" 0 "round $i"
	done
}

test_core_refused_namespace_named() {
	# A host that allows user namespaces but refuses another one the sandbox needs (here the
	# network namespace, by a zero user.max_net_namespaces in a user namespace of the test's
	# own): the error names that namespace, not "userns: available".
	local out
	out=$(unshare -Ur sh -c 'echo 0 > /proc/sys/user/max_net_namespaces && "$0" run -w "$1" --audit off --json -- true' "$CORRAL" "$WS" 2>/dev/null) ||
		true
	[ -n "$out" ] || fail "no result"
	assert_eq "$(jget error.step <<<"$out")" clone
	assert_contains "$(jget error.message <<<"$out")" "refuses the network namespace"
	assert_contains "$(jget error.message <<<"$out")" "although user namespaces work"
}

test_core_timeout_graceful_term() {
	local out
	out=$(cr --json -t 0.3 -- sleep 10)
	assert_eq "$(jget timed_out <<<"$out")" true
	assert_eq "$(jget signal <<<"$out")" 15
}

# As timeout(1): a command stopped when the timeout comes is continued after its SIGTERM, so
# its handler runs within the grace instead of the SIGKILL at its end. Evidence on the host:
# the handler's file, and a run that did not wait out the 5 s grace.
test_core_timeout_continues_a_stopped_command() {
	local out
	out=$(cr --json -t 0.4 --kill-after 5 -c 'trap "echo cleaned > handler-ran; exit 3" TERM; kill -STOP $$; sleep 10')
	assert_eq "$(jget timed_out <<<"$out")" true
	[ "$(cat "$WS/handler-ran" 2>/dev/null)" = cleaned ] || fail "the SIGTERM handler did not run"
	[ "$(jget duration_ms <<<"$out")" -lt 4000 ] || fail "the run waited out the grace: $(jget duration_ms <<<"$out") ms"
	if ! via_mcp_door; then
		local err
		err=$(cr -t 0.3 -- sleep 5 2>&1 >/dev/null)
		assert_contains "$err" "the 300 ms timeout passed"
	fi
}

test_core_grandchild_holding_pipe() {
	local mark="corral-gc-$RANDOM$RANDOM" start end out
	start=$(date +%s%N)
	out=$(cr -t 20 -- bash -c "(exec -a $mark sleep 60 &); echo main-done")
	assert_eq $? 0
	end=$(date +%s%N)
	assert_eq "$out" main-done
	[ $(((end - start) / 1000000)) -lt 3000 ] || fail "the run waited for the grandchild"
	assert_no_survivor "$mark"
}

# The bounded drain is what ends this run: in mode none (no pid namespace) the command kills
# its init, and a setsid holder keeps stdout open. The supervisor reaps the init, drains for
# 500 ms and ends the run. The init is gone, so nothing sweeps: what the supervisor still
# kills is the command's process group (a background holder and the shell's own sleep). The
# setsid holder is outside both and survives (DESIGN §17, what escapes in mode none).
# Host-side: the holders ran (control), the run ended well under 2 s although the command
# would go on for 5 s and a holder for 9 s, and the process-group members are gone before
# the cleanup kills the documented survivor.
test_core_drain_bounded_when_init_killed() {
	local m="corralgc$RANDOM$RANDOM" start end out ms i
	cp /bin/sleep "$WS/$m-pg"
	cp /bin/sleep "$WS/$m-sid"
	cp /bin/sleep "$WS/$m-fg"
	esc_defer "kill -9 \$(pgrep -f -- '^\./$m-')"
	start=$(date +%s%N)
	"$CORRAL" run -w "$WS" --mode none --json -t 20 -c "./$m-pg 8 & setsid ./$m-sid 9 & sleep .2; echo hi; kill -9 \$PPID; ./$m-fg 5" >"$WS/.out" 2>"$WS/.err" &
	local bg=$!
	# control: the holders really run (a holder that never started would prove nothing)
	# (each seen once: the group's holder lives only until the drain ends, ~0.7 s)
	local pg= sid=
	for i in $(seq 1 500); do
		pgrep -f -- "^\./$m-pg" >/dev/null && pg=1
		pgrep -f -- "^\./$m-sid" >/dev/null && sid=1
		[ -n "$pg" ] && [ -n "$sid" ] && break
		sleep 0.02
	done
	[ -n "$pg" ] && [ -n "$sid" ] || fail "the holders did not start (pg ${pg:-no}, sid ${sid:-no}): $(cat "$WS/.err")"
	wait "$bg"
	end=$(date +%s%N)
	ms=$(((end - start) / 1000000))
	out=$(cat "$WS/.out")
	assert_eq "$(jget stdout <<<"$out")" hi
	assert_eq "$(jget timed_out <<<"$out")" false
	[ "$ms" -lt 2000 ] || fail "the run took $ms ms: the drain after the init's death is not bounded"
	# the setsid holder kept stdout open until the drain ended the run (else this proves
	# nothing about the drain)
	pgrep -f -- "^\./$m-sid" >/dev/null || fail "control: the setsid holder was gone before the run ended"
	# killed by corral (the command's process group), not by the cleanup below
	assert_no_survivor "^\./$m-pg"
	assert_no_survivor "^\./$m-fg"
}

test_core_stdin_default_devnull() {
	local out
	out=$(echo "host-input" | cr -- cat)
	assert_eq "$out" ""
}

test_core_stdin_passthrough() {
	local out
	out=$(printf 'line1\nline2\n' | cr -i -- wc -l)
	assert_eq "$out" 2
	out=$(head -c 3000000 /dev/zero | cr -i -- wc -c)
	assert_eq "$out" 3000000
}

test_core_env_scrubbed() {
	local out
	out=$(HOST_SECRET_TOKEN=s3cr3t-value AWS_SECRET_ACCESS_KEY=aws-s3cr3t cr -- env)
	assert_not_contains "$out" "s3cr3t"
	assert_contains "$out" "HOME=$WS"
	assert_contains "$out" "PATH=/usr/local/bin:/usr/bin:/bin"
	local n; n=$(wc -l <<<"$out")
	[ "$n" -le 8 ] || fail "environment has $n variables; it must be built from scratch: $out"
}

test_core_env_pass_and_set() {
	local out
	out=$(MY_VAR=from-host cr --env MY_VAR --env OTHER=set-here --env UNSET_XYZ -- env)
	assert_contains "$out" "MY_VAR=from-host"
	assert_contains "$out" "OTHER=set-here"
	assert_not_contains "$out" "UNSET_XYZ"
}

test_core_limit_cpu() {
	local out
	out=$(cr --json --cpu 1 -c 'while :; do :; done')
	assert_eq "$(jget limit <<<"$out")" cpu
	assert_contains "$(jget signal <<<"$out")" 24
}

test_core_limit_fsize() {
	local out
	out=$(cr --json --fsize 100k -- sh -c 'head -c 1000000 /dev/zero > big')
	assert_eq "$(jget limit <<<"$out")" fsize
	local sz; sz=$(stat -c %s "$WS/big")
	[ "$sz" -le 102400 ] || fail "file grew to $sz bytes past the 100k limit"
}

test_core_limit_nofile() {
	local out
	out=$(cr --nofile 32 -- sh -c 'ulimit -n')
	assert_eq "$out" 32
}

test_core_limit_memory() {
	local out
	out=$(cr --json --memory 64M -- python3 -c 'x = bytearray(400 << 20); print("allocated")')
	assert_not_contains "$(jget stdout <<<"$out")" allocated
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" memory
	else
		# rlimit fallback: the allocation fails inside the program
		assert_contains "$(jget stderr <<<"$out")" MemoryError
	fi
}

test_core_limit_pids() {
	cp "$PROBE" "$WS/probe"
	local out so n
	out=$(cr --json --pids 20 -- ./probe fork-bomb 60)
	so=$(jget stdout <<<"$out")
	n=$(sed -nE 's/.*forked=([0-9]+).*/\1/p' <<<"$so")
	[ -n "$n" ] || fail "no fork count: $so"
	# the command's tree gets exactly the 20: the probe and 19 children (the init is on top)
	[ "$n" -eq 19 ] || fail "forked $n processes with --pids 20 (expected 19 beside the probe)"
	assert_contains "$so" "EAGAIN"
	if [ "$(jget isolation.cgroup.applied <<<"$out")" = true ]; then
		assert_eq "$(jget limit <<<"$out")" pids
	fi
	# so --pids 1 runs a command that starts nothing, and --pids 2 a shell that starts one
	cr --pids 1 -- true || fail "--pids 1 did not run true"
	assert_eq "$(cr --pids 2 -- sh -c 'ls / >/dev/null && echo ran')" ran
}

test_core_output_cap_head_and_tail() {
	local out
	out=$(cr --json --max-output 1000 -c 'echo FIRST; seq 1 100000; echo LAST')
	assert_eq "$(jget stdout_truncated <<<"$out")" true
	local so; so=$(jget stdout <<<"$out")
	assert_contains "$so" FIRST
	assert_contains "$so" LAST
	assert_contains "$so" "bytes dropped"
	local total; total=$(jget stdout_bytes <<<"$out")
	assert_eq "$total" "$(( $(seq 1 100000 | wc -c) + 11 ))"
	assert_eq "$(jget stderr_truncated <<<"$out")" false
}

test_core_yes_flood_flat_memory() {
	# Max RSS of the supervisor (and its sandbox, which is tiny) for 16 MiB and 1 GiB of
	# output: flat memory means the two are about equal.
	local small big
	small=$(python3 - "$CORRAL" "$WS" 16 <<'PY'
import os, sys, subprocess
p = subprocess.Popen([sys.argv[1], "run", "-w", sys.argv[2], "--json", "-c", "yes | head -c %sM" % sys.argv[3]], stdout=subprocess.DEVNULL)
_, st, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss)
PY
)
	big=$(python3 - "$CORRAL" "$WS" 1024 <<'PY'
import os, sys, subprocess
p = subprocess.Popen([sys.argv[1], "run", "-w", sys.argv[2], "--json", "-c", "yes | head -c %sM" % sys.argv[3]], stdout=subprocess.DEVNULL)
_, st, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss)
PY
)
	[ "$big" -lt $((small + 4096)) ] || fail "max RSS grew from ${small} KiB to ${big} KiB for 1 GiB of output"
	# (a sanitizer build carries its shadow memory: only the flatness counts there)
	[ -n "${CORRAL_SANITIZED:-}" ] || [ "$big" -lt 32768 ] || fail "max RSS ${big} KiB for a 1 MiB cap"
}

test_core_flood_does_not_deadlock_both_streams() {
	local out
	out=$(cr --json -t 30 -c 'head -c 20000000 /dev/zero >&2 & head -c 20000000 /dev/zero; wait')
	assert_eq "$(jget exit_code <<<"$out")" 0
	assert_eq "$(jget stdout_bytes <<<"$out")" 20000000
	assert_eq "$(jget stderr_bytes <<<"$out")" 20000000
}

test_core_bad_flags() {
	local e
	for args in "--timeout -1" "--timeout abc" "--memory 12Q" "--cpu -1" "--pids -3" \
		"--nofile x" "--max-output 1" "--mode bogus" "--net wifi" "--bogus-flag" \
		"--fsize 1.2.3" "--kill-after -5"; do
		# shellcheck disable=SC2086
		e=$("$CORRAL" run -w "$WS" $args -- true 2>&1)
		assert_eq $? 125 "for $args"
		[ "$(wc -l <<<"$e")" -eq 1 ] || fail "not exactly one line of error for $args: $e"
		assert_contains "$e" "corral"
	done
	e=$("$CORRAL" run -w /nonexistent/dir -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "/nonexistent/dir"
	e=$("$CORRAL" run -w "$WS" 2>&1); assert_eq $? 125
	assert_contains "$e" "no command"
	e=$("$CORRAL" run -w "$WS" -C /usr -- true 2>&1); assert_eq $? 125
	assert_contains "$e" "outside the workspace"
	e=$("$CORRAL" frobnicate 2>&1); assert_eq $? 125
}

test_core_help_version_man() {
	local h
	h=$("$CORRAL" --help); assert_eq $? 0
	assert_contains "$h" "run"
	h=$("$CORRAL" help run)
	for flag in --workspace --cwd --timeout --kill-after --memory --cpu --pids --nofile \
		--fsize --max-output --env --stdin --mode --json --net; do
		assert_contains "$h" "$flag"
	done
	assert_contains "$("$CORRAL" version)" "corral "
	# help for an unknown command is the error `corral bogus` gives, not the general help
	local e o
	e=$("$CORRAL" help bogus 2>&1 >/dev/null); assert_eq $? 125 "help bogus"
	assert_eq "$e" "corral: unknown command 'bogus'; run 'corral --help' for the list"
	assert_eq "$("$CORRAL" bogus 2>&1)" "$e" "the same as corral bogus"
	o=$("$CORRAL" help bogus 2>/dev/null); assert_eq "$o" "" "nothing on stdout"
	for c in run shell check mcp policy audit version help; do
		o=$("$CORRAL" help $c) || fail "help $c: exit $?"
		assert_contains "$o" "Usage: corral"
	done
	if command -v man >/dev/null; then
		local m
		m=$(MANWIDTH=80 man -l "$DOCS/corral.1" 2>&1)
		assert_contains "$m" "corral run"
		assert_contains "$m" "--kill-after"
	fi
}

test_core_cwd() {
	mkdir -p "$WS/sub/dir"
	assert_eq "$(cr -C sub/dir -- pwd)" "$WS/sub/dir"
	assert_eq "$(cr -- pwd)" "$WS"
}

# What the plan and the record say is what holds: mode none shares the host's network (the
# dry run must not say "loopback only"); --pids 0 is no process limit (not RLIMIT_NPROC);
# --nofile 0 is "none", as in a profile; a size below one byte is refused, not "no limit".
test_core_plan_and_record_say_what_holds() {
	local out
	out=$("$CORRAL" run -w "$WS" --mode none --dry-run -- true 2>&1)
	assert_contains "$out" "network:   host (shared: no network namespace"
	assert_not_contains "$out" "loopback only"
	out=$("$CORRAL" run -w "$WS" --dry-run -- true 2>&1)
	assert_contains "$out" "network:   none (loopback only)"
	out=$(cr --json --pids 0 -- true)
	assert_contains "$(jget isolation.cgroup.detail <<<"$out")" "NO process limit"
	assert_not_contains "$(jget isolation.rlimits.detail <<<"$out")" "nproc"
	if ! via_mcp_door; then
		"$CORRAL" run -w "$WS" --nofile 0 -- true || fail "--nofile 0 (none) was refused"
		out=$("$CORRAL" run -w "$WS" --memory 0.5 -- true 2>&1); assert_eq $? 125
		assert_contains "$out" "below one byte"
	fi
}

# Directories given that cannot be used are refused before anything is built, naming why:
# a file as -C (also in a dry run), a workspace this user cannot enter, a symlink loop.
test_core_unusable_directories_refused() {
	local err
	: >"$WS/afile"
	err=$(cr -C afile -- pwd 2>&1 >/dev/null); assert_eq $? 125
	assert_contains "$err" "cwd: afile is not a directory"
	if ! via_mcp_door; then
		err=$("$CORRAL" run -w "$WS" -C afile --dry-run -- pwd 2>&1 >/dev/null); assert_eq $? 125
		assert_contains "$err" "not a directory"
		ln -s loop2 "$WS/loop1"; ln -s loop1 "$WS/loop2"
		err=$("$CORRAL" run -w "$WS/loop1" -- true 2>&1 >/dev/null); assert_eq $? 125
		assert_contains "$err" "loops"
		assert_not_contains "$err" "create it"
		if ! is_root; then
			mkdir "$WS/closed"; chmod 000 "$WS/closed"
			err=$("$CORRAL" run -w "$WS/closed" -- true 2>&1 >/dev/null); local rc=$?
			chmod 755 "$WS/closed"
			assert_eq $rc 125
			assert_contains "$err" "workspace: $WS/closed: Permission denied for uid"
			assert_not_contains "$err" "protected path"
		fi
	fi
}

# A workspace on the kernel's interface file systems (/sys, /proc, ...) is refused up front,
# for every user, saying what it is (not, as root once read, "cannot inspect the protected
# path /sys/kernel"): bound read-write into the sandbox it would let the command change the
# host kernel's settings, and a sandbox otherwise gets no /sys and a /proc of its own.
test_core_kernel_fs_workspace_refused() {
	local err w rc
	ln -s /sys/kernel "$WS/kern"
	for w in /sys/kernel /sys/fs/cgroup /proc "$WS/kern"; do
		err=$("$CORRAL" run -w "$w" --audit off -- true 2>&1 >/dev/null); rc=$?
		assert_eq "$rc" 125 "-w $w: $err"
		assert_eq "$(wc -l <<<"$err")" 1 "-w $w: one line: $err"
		assert_contains "$err" "corral: workspace: $w"
		assert_contains "$err" "the host kernel's interface"
		assert_contains "$err" "pass a project directory"
		assert_not_contains "$err" "protected path"
	done
	err=$("$CORRAL" run -w /sys/kernel --dry-run -- true 2>&1 >/dev/null); assert_eq $? 125 "dry run"
	assert_contains "$err" "workspace: /sys/kernel is on sysfs"
	err=$("$CORRAL" run -w "$WS/kern" -- true 2>&1 >/dev/null)
	assert_contains "$err" "workspace: $WS/kern (/sys/kernel) is on sysfs"
	err=$("$CORRAL" run -w /sys/fs/cgroup -- true 2>&1 >/dev/null)
	assert_contains "$err" "workspace: /sys/fs/cgroup is "
	err=$("$CORRAL" mcp -w /sys/kernel </dev/null 2>&1 >/dev/null); assert_eq $? 125 "corral mcp"
	assert_contains "$err" "workspace: /sys/kernel is on sysfs"
	# control: a project directory under /tmp is fine
	"$CORRAL" run -w "$WS" --audit off -- true || fail "the control run failed"
}

# The host's /dev as the workspace would be bound read-write over the sandbox's own /dev: its
# /dev/null unusable, and the host's device nodes removable from inside. Refused, as for the
# kernel's file systems; a file system mounted below /dev (/dev/shm) is an ordinary one.
test_core_host_dev_workspace_refused() {
	local err rc w d
	d=$(mktemp -d /dev/shm/corral-ws.XXXXXX) || fail "no /dev/shm here"
	ln -s /dev "$WS/devlink"
	for w in /dev /dev/mapper "$WS/devlink"; do
		[ -d "$w" ] || continue
		err=$("$CORRAL" run -w "$w" --audit off -- true 2>&1 >/dev/null); rc=$?
		assert_eq "$rc" 125 "-w $w: $err"
		assert_contains "$err" "corral: workspace: $w"
		assert_contains "$err" "the host's /dev"
	done
	err=$("$CORRAL" mcp -w /dev </dev/null 2>&1 >/dev/null); assert_eq $? 125 "corral mcp: $err"
	assert_contains "$err" "the host's /dev"
	# control: a workspace on /dev/shm runs, its write lands on the host, and /dev/null works
	"$CORRAL" run -w "$d" --audit off -c 'echo in-shm > f; echo x > /dev/null' ||
		{ rm -rf "$d"; fail "the /dev/shm control run failed"; }
	assert_eq "$(cat "$d/f")" in-shm
	rm -rf "$d"
}

# The workspace's bind is recursive: what is mounted below it comes along, read-write. One of
# the kernel's file systems there (a chroot's /proc, a build root's /dev) would hand the
# command the host kernel's settings or the host's device nodes, so the run is refused,
# naming the mount; an ordinary file system below it is fine. A --rw path on one is refused
# too. (The mounts are made in a mount namespace of the test's own, as root or not, so the
# host's table is untouched.)
test_core_kernel_mount_below_workspace_refused() {
	local out
	out=$(unshare -Urm bash -c '
		C=$1 W=$2
		mkdir -p "$W/kt1/psys" "$W/kt2/dev" "$W/kt3/tmpx"
		mount --bind /proc/sys "$W/kt1/psys" || { echo "setup: bind of /proc/sys"; exit 0; }
		mount --rbind /dev "$W/kt2/dev" || { echo "setup: rbind of /dev"; exit 0; }
		mount -t tmpfs none "$W/kt3/tmpx" || { echo "setup: tmpfs"; exit 0; }
		"$C" run -w "$W/kt1" --audit off -- true 2>&1; echo "rc=$?"
		"$C" run -w "$W/kt1" --dry-run -- true 2>&1 | grep "^error:"; echo "rc=${PIPESTATUS[0]}"
		"$C" run -w "$W/kt2" --audit off -- true 2>&1; echo "rc=$?"
		"$C" run -w "$W/kt3" --audit off -c "echo below > tmpx/f; cat tmpx/f" 2>&1
		echo "rc=$?"
	' sh "$CORRAL" "$WS")
	assert_not_contains "$out" "setup:"
	local lines; mapfile -t lines <<<"$out"
	assert_contains "${lines[0]}" "corral: workspace: $WS/kt1 has proc mounted at $WS/kt1/psys"
	assert_contains "${lines[0]}" "umount $WS/kt1/psys"
	assert_eq "${lines[1]}" rc=125 "$out"
	assert_contains "${lines[2]}" "error:     workspace: $WS/kt1 has proc mounted at $WS/kt1/psys"
	assert_eq "${lines[3]}" rc=125 "$out"
	assert_contains "${lines[4]}" "has the host's /dev mounted at $WS/kt2/dev"
	assert_eq "${lines[5]}" rc=125 "$out"
	assert_eq "${lines[6]}" below "control: a tmpfs below the workspace"
	assert_eq "${lines[7]}" rc=0 "$out"
	local err
	err=$("$CORRAL" run -w "$WS" --rw /proc/sys/vm --audit off -- true 2>&1 >/dev/null)
	assert_eq $? 125 "--rw /proc/sys/vm: $err"
	assert_contains "$err" "filesystem.write: /proc/sys/vm is on proc"
	rm -rf "$WS/kt1" "$WS/kt2" "$WS/kt3"
}

test_core_workspace_write_visible_on_host() {
	cr -c 'echo made-inside > out.txt'
	assert_eq "$(cat "$WS/out.txt")" made-inside
}

test_core_json_usage_and_duration() {
	local out
	out=$(cr --json -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done')
	local u; u=$(jget usage.user_ms <<<"$out")
	[ "$u" -gt 0 ] || fail "user_ms is $u for a busy loop"
	[ "$(jget usage.max_rss_kb <<<"$out")" -gt 0 ] || fail "no max_rss"
	[ "$(jget duration_ms <<<"$out")" -ge "$u" ] || true
	local id; id=$(jget id <<<"$out")
	assert_eq "${#id}" 36
}

# Live output under the default redaction (issue 2 "output streams live"; DESIGN §12). The
# command's stdout is read through a pipe as it comes; prints a JSON object with what had
# arrived EARLY seconds after the start ("early") and everything at the end ("full"), each
# followed by a '|' so that a shell substitution keeps their trailing newlines.
live_read() { # EARLY corral-run-args...
	python3 - "$@" <<'PY'
import json, os, select, subprocess, sys, time
early_s = float(sys.argv[1])
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
fd, t0, buf, early = p.stdout.fileno(), time.monotonic(), b"", None
while True:
    left = t0 + early_s - time.monotonic()
    if early is None and left <= 0:
        early = buf
    r, _, _ = select.select([fd], [], [], max(left, 0) if early is None else 30)
    if r:
        d = os.read(fd, 65536)
        if not d:
            break
        buf += d
p.wait()
print(json.dumps({"early": (buf if early is None else early).decode("latin-1") + "|",
                  "full": buf.decode("latin-1") + "|"}))
PY
}

test_core_live_line_not_held_by_redaction() {
	local out
	# the whole first line, newline included, well before the command ends
	out=$(live_read 2 "$CORRAL" run -w "$WS" -c 'echo first; sleep 4')
	assert_eq "$(jget early <<<"$out")" "first"$'\n|' "the first line within 2 s (the command runs 4 s)"
	# a server's last line, and a prompt without a newline (released after a pause)
	out=$(live_read 2 "$CORRAL" run -w "$WS" -c 'echo Listening on http://127.0.0.1:8000; printf "Password:"; sleep 4')
	assert_eq "$(jget early <<<"$out")" "Listening on http://127.0.0.1:8000"$'\n'"Password:|"
	# control: the same with redaction off
	out=$(live_read 2 "$CORRAL" run -w "$WS" --redact off -c 'echo first; sleep 4')
	assert_eq "$(jget early <<<"$out")" "first"$'\n|'
}

test_core_live_split_secret_redacted() {
	local out early full tok=ghp_1234567890abcdefghijklmnopqrstuvwxyz
	# a token cut by a pause longer than the idle release: its start stays held, the rest
	# of the line comes out, and the whole token is redacted
	out=$(live_read 2.5 "$CORRAL" run -w "$WS" -c "printf 'tok ${tok:0:18}'; sleep 5; printf '${tok:18} end\n'")
	early=$(jget early <<<"$out")
	full=$(jget full <<<"$out")
	assert_eq "$early" "tok |" "the safe part is released, the token prefix held"
	assert_eq "$full" "tok [REDACTED:github] end"$'\n|'
	assert_not_contains "$full" "${tok:4:14}"
}

test_core_redaction_across_truncation_boundary() {
	# --max-output 1k keeps 512 bytes of head and 512 of tail: one token straddles each edge
	# (in the raw output and in the redacted one), both are redacted and counted
	local out so tok=ghp_1234567890abcdefghijklmnopqrstuvwxyz
	out=$(cr --json --max-output 1k -c "printf '%0499d ' 0; printf '$tok'; printf ' %05000d ' 0; printf '$tok'; printf ' %0499d' 0")
	assert_eq "$(jget stdout_truncated <<<"$out")" true
	assert_eq "$(jget redactions.count <<<"$out")" 2
	assert_eq "$(jget redactions.kinds.github <<<"$out")" 2
	so=$(jget stdout <<<"$out")
	assert_contains "$so" "bytes dropped"
	assert_not_contains "$so" ghp_
	assert_not_contains "$so" 567890abcdef
	assert_contains "$so" "[REDACTED:"
}
