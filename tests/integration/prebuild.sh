# Sandboxes built ahead (issue 9's fast path): `corral mcp --prebuild N` parks N sandboxes
# while it is idle; a call whose plan key matches runs in one, once. These tests hold that
# to what the plain path guarantees, with host-side evidence: a parked sandbox is never used
# twice, never used for a plan it was not built for (a protected path replaced on the host in
# between), never outlives the server, and counts its deadline from the call. The escape
# battery runs through this door too (test_escape_mcppre_*, tests/escape/via_mcp.py).

prebuild_py() {
	PYTHONPATH="$TESTDIR:$TESTDIR/escape" CORRAL="$CORRAL" WS="$WS" python3 - "$@"
}

# Python helpers shared by the tests below (prepended to each script).
PREBUILD_PY_HEAD='
import os, time, json, mcp_client as M

# parked sandboxes of a server pid: its children named corral-init, alive, whose one child
# is named corral-parked (waiting for its command)
from via_mcp import parked as parked_of, waiting as waiting_of, alive, gone_soon

def wait_parked(s, before, timeout=10):
    """The server idles 10 ms, then builds: wait for a child it did not have in before (the
    snapshot taken before the last call) that stays (the sandbox of that call, if it had one
    built, is reaped within a millisecond of its reply)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        new = parked_of(s.proc.pid) - before
        if new:
            time.sleep(0.05)
            new &= parked_of(s.proc.pid)
            if new:
                return new
        time.sleep(0.02)
    raise AssertionError("no sandbox was built ahead within %ss (stderr: %r)"
                         % (timeout, s.stderr_text[-400:]))

def gather_parked(s, n, timeout=10):
    """Pids of the first n sandboxes the server parks."""
    got = set()
    until = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < until:
        got |= parked_of(s.proc.pid)
        time.sleep(0.05)
    assert len(got) >= n, got
    return got

def server(*extra, prebuild=1):
    s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--prebuild", str(prebuild)]
                               + list(extra)))
    s.initialize()
    return s

def sc(r):
    return r["structuredContent"]

'

# One parked sandbox per call, never reused: what a call leaves in its private /tmp is not in
# the next call's, the first call's sandbox processes are gone, and a prebuilt call carries
# the same isolation record as one built for it.
test_prebuild_parked_sandbox_used_once() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server()
first = wait_parked(s, set())
before = parked_of(s.proc.pid)
r1 = sc(s.call("run_command", {"command": "touch /tmp/left-by-call-1; echo pid=\$\$; ls /tmp"}))
assert r1["exit_code"] == 0 and r1["prebuilt_ms"] is not None, r1
assert "left-by-call-1" in r1["stdout"], r1["stdout"]
# the sandbox that ran call 1 is gone (the server reaps it before it idles)
second = wait_parked(s, before)
assert not any(alive(p) for p in first), "the first parked sandbox still runs: %s" % first
r2 = sc(s.call("run_command", {"command": "ls -a /tmp; echo end"}))
assert r2["prebuilt_ms"] is not None, r2
assert "left-by-call-1" not in r2["stdout"], "a parked sandbox was used twice: %r" % r2["stdout"]
assert r1["id"] != r2["id"]
s.close()
# the plain path, same policy: the same isolation record
p = server(prebuild=0)
r3 = sc(p.call("run_command", {"command": "true"}))
p.close()
assert r3["prebuilt_ms"] is None, r3
assert r3["isolation"] == r2["isolation"], (r3["isolation"], r2["isolation"])
assert r3["mode"] == r2["mode"]
PY
	[ ! -e "$WS/left-by-call-1" ] || fail "the sandbox's /tmp file reached the workspace"
}

# A parked sandbox's command starts as a built one does: every signal disposition at its
# default (the server ignores SIGPIPE; the init reset them before the command came), nothing
# blocked, so a pipe into head ends.
test_prebuild_signal_dispositions_reset() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server()
wait_parked(s, set())
r = sc(s.call("run_command", {"command":
    "grep -E '^Sig(Ign|Blk):' /proc/self/status; yes | head -1 >/dev/null; echo yes: \$?"}))
s.close()
assert r["prebuilt_ms"] is not None, r
assert "SigIgn:\t0000000000000000" in r["stdout"], r["stdout"]
assert "SigBlk:\t0000000000000000" in r["stdout"], r["stdout"]
assert "yes: 0" in r["stdout"], r["stdout"]
PY
}

# A parked sandbox's command has the server's CPU set (the init builds elsewhere and takes the
# set back before it starts the command's process), as a built one's does.
test_prebuild_command_keeps_server_cpu_set() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server()
wait_parked(s, set())
want = [l for l in open("/proc/%d/status" % s.proc.pid) if l.startswith("Cpus_allowed_list")]
r = sc(s.call("run_command", {"command": "grep Cpus_allowed_list /proc/self/status /proc/1/status"}))
r2 = sc(s.call("shell_exec", {"command": "grep Cpus_allowed_list /proc/self/status"}))
s.close()
assert r["prebuilt_ms"] is not None, r
lines = r["stdout"].splitlines()
assert len(lines) == 2 and all(l.split(":", 1)[1] == want[0].strip() for l in lines), (lines, want)
assert r2["stdout"].strip() == want[0].strip(), (r2["stdout"], want)
PY
}

# Calls back to back (each sent as soon as the previous reply arrives) never leave the server
# idle, so it builds the next call's sandbox beside the running one: nearly every call is
# served prebuilt (before the pipeline, only the first was), and each in a sandbox of its own
# (nothing a call leaves in its private /tmp is in any later call's).
test_prebuild_back_to_back_calls_pipelined() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server()
wait_parked(s, set())
n, hits = 40, 0
for i in range(n):
    r = sc(s.call("run_command", {"command": "ls -a /tmp; touch /tmp/mark-%d" % i}))
    assert r["exit_code"] == 0, r
    seen = [l for l in r["stdout"].split() if l.startswith("mark-")]
    assert not seen, "call %d found %s: a sandbox was used twice" % (i, seen)
    hits += r["prebuilt_ms"] is not None
s.close()
assert hits >= n * 3 // 4, "only %d of %d back-to-back calls were served prebuilt" % (hits, n)
print("%d of %d back-to-back calls prebuilt" % (hits, n))
PY
	[ -z "$(ls "$WS" | grep '^mark-')" ] || fail "a sandbox's /tmp file reached the workspace"
}

# The plan key covers which files the protected paths are: a .git/hooks replaced on the host
# after the sandbox was parked (the parked sandbox's read-only bind now covers the old
# directory only) must not be handed to a call. The call gets a sandbox built for it, the
# hook is not planted (host-side: no file in the new hooks directory or the old one), and once
# the server has rebuilt, the next call is prebuilt again and just as unable to plant it.
test_prebuild_replaced_protected_path_is_not_reused() {
	git -C "$WS" init -q || fail "git init"
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
ws = os.environ["WS"]
s = server()
parked = wait_parked(s, set())
os.rename(ws + "/.git/hooks", ws + "/.git/hooks-old")
os.mkdir(ws + "/.git/hooks")
plant = "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo rc=\$?"
before = parked_of(s.proc.pid)
r = sc(s.call("run_command", {"command": plant}))
assert r["prebuilt_ms"] is None, "a sandbox parked before the replacement was used: %r" % r
assert "rc=0" not in r["stdout"], r
# rebuilt for the new directory: prebuilt again, and protected again
wait_parked(s, before)
r = sc(s.call("run_command", {"command": plant}))
assert r["prebuilt_ms"] is not None, r
assert "rc=0" not in r["stdout"], r
s.close()
PY
	[ ! -e "$WS/.git/hooks/pre-commit" ] || fail "a hook was planted in the new .git/hooks"
	[ ! -e "$WS/.git/hooks-old/pre-commit" ] || fail "a hook was planted in the old hooks"
}

# A parked sandbox watches the git redirects absent when it was built, to remove one its
# command plants. One that never ran a command planted nothing: a config.worktree the host
# made meanwhile (git sparse-checkout writes it) must survive the sandbox being dropped (the
# call's key misses) and the server's exit. Host-side: the file and its content.
test_prebuild_dropped_sandbox_keeps_host_git_files() {
	git -C "$WS" init -q || fail "git init"
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
ws = os.environ["WS"]
s = server()
parked = wait_parked(s, set())
with open(ws + "/.git/config.worktree", "w") as f:
    f.write("[core]\\n\\tsparseCheckout = true\\n")
r = sc(s.call("run_command", {"command": "cat .git/config.worktree"}))
assert r["prebuilt_ms"] is None, "a sandbox parked before the file was made was used: %r" % r
assert "sparseCheckout" in r["stdout"], r
assert gone_soon(parked) == [], "the dropped sandbox is still there"
assert os.path.exists(ws + "/.git/config.worktree"), "the host's config.worktree was removed"
s.close()
PY
	assert_contains "$(cat "$WS/.git/config.worktree" 2>&1)" "sparseCheckout = true"
}

# A workspace where the protected paths are missing and cannot be made (a read-only file
# system as root; a directory of another owner as uid 65534): the real plan has no
# placeholder there, and a call's plan key, a dry run, must predict that, or no call ever
# matches a parked sandbox (before: 0 of 3 prebuilt). Host-side: nothing was created.
test_prebuild_matches_where_placeholders_cannot_be_made() {
	local ws
	if [ "$(id -u)" = 0 ]; then
		ws="$WS/ro"
		mkdir -p "$ws" && mount -t tmpfs -o ro,size=1m corral-ro "$ws" || fail "mount ro tmpfs"
	else
		ws=/usr/share/common-licenses
		[ -d "$ws" ] && [ ! -w "$ws" ] || fail "control: $ws is missing or writable by $(id -u)"
	fi
	local before after
	before=$(ls -A "$ws" | sort | tr '\n' ' ')
	PBWS="$ws" prebuild_py <<PY
$PREBUILD_PY_HEAD
s = M.Server(M.corral_argv(["-w", os.environ["PBWS"], "--prebuild", "1", "--audit", "off"]))
s.initialize()
hits = 0
wait_parked(s, set())
for i in range(3):
    before = parked_of(s.proc.pid)
    r = sc(s.call("run_command", {"command": "ls -A; test -e .git && echo has-git; true"}))
    assert r["exit_code"] == 0, r
    assert "has-git" not in r["stdout"], r
    hits += r["prebuilt_ms"] is not None
    if i < 2:
        wait_parked(s, before)
s.close()
assert hits == 3, "only %d of 3 calls were served prebuilt" % hits
PY
	local rc=$?
	after=$(ls -A "$ws" | sort | tr '\n' ' ')
	[ "$(id -u)" = 0 ] && umount "$ws"
	[ $rc = 0 ] || fail "the MCP session failed (see the traceback above)"
	assert_eq "$after" "$before"
}

# A call whose plan differs from what was built (its own environment) gets a sandbox of its
# own; the server then builds for that plan, and the same call is prebuilt, with its
# variable; a call of the first plan misses in turn.
test_prebuild_follows_the_latest_plan() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server("--allow-env", "PREBUILD_T")
wait_parked(s, set())
call = {"command": "echo v=\$PREBUILD_T", "env": {"PREBUILD_T": "one"}}
before = parked_of(s.proc.pid)
r = sc(s.call("run_command", call))
assert r["prebuilt_ms"] is None and r["stdout"] == "v=one\n", r
wait_parked(s, before)
r = sc(s.call("run_command", call))
assert r["prebuilt_ms"] is not None and r["stdout"] == "v=one\n", r
r = sc(s.call("run_command", {"command": "echo v=\$PREBUILD_T"}))
assert r["prebuilt_ms"] is None and r["stdout"] == "v=\n", r
s.close()
PY
}

# The deadline starts with the call, not with the building: a sandbox parked for longer than
# the timeout still gives the command its whole time.
test_prebuild_timeout_counts_from_the_call() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server("-t", "2")
wait_parked(s, set())
time.sleep(2.5)
r = sc(s.call("run_command", {"command": "sleep 0.3; echo done"}))
assert r["prebuilt_ms"] is not None and r["prebuilt_ms"] >= 2400, r
assert not r["timed_out"] and r["stdout"] == "done\n", r
assert r["duration_ms"] < 2000, r
# and it still fires
r = sc(s.call("run_command", {"command": "sleep 5"}))
assert r["timed_out"], r
s.close()
PY
}

# Nothing parked outlives the server: its sandboxes (no command in them) are gone once it
# has exited, inits and waiting command processes, by host-side evidence (their pids).
test_prebuild_parked_sandboxes_end_with_the_server() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server(prebuild=3)
got = gather_parked(s, 3)
waiting = waiting_of(got)
assert len(waiting) == 3, waiting
got |= waiting
assert s.close() == 0
left = gone_soon(got, 0.2)
assert not left, "parked sandboxes survived the server: %s" % left
PY
}

# A server killed outright (SIGKILL: no shutdown of its own) takes its parked sandboxes
# with it: each init dies with its parent (its death signal), by host-side evidence.
test_prebuild_parked_sandboxes_die_with_a_killed_server() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
import signal
s = server(prebuild=2)
got = gather_parked(s, 2)
waiting = waiting_of(got)
assert len(waiting) == 2, waiting
got |= waiting
s.proc.send_signal(signal.SIGKILL)
s.proc.wait()
left = gone_soon(got)
assert not left, "parked sandboxes survived a killed server: %s" % left
PY
}

# The command goes to a parked sandbox in one message of at most 60 KiB of arguments: a
# long one (50 KiB) is served prebuilt and arrives whole; a longer one (100 KiB) gets a
# sandbox of its own, and arrives whole too.
test_prebuild_long_argv() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
s = server()
wait_parked(s, set())
for size, prebuilt in ((50 * 1024, True), (100 * 1024, False)):
    args = ["a%05d" % i + "x" * 94 for i in range(size // 101)]
    before = parked_of(s.proc.pid)
    r = sc(s.call("run_command", {"argv": ["sh", "-c", 'printf "%s\\n" "\$#" "\$1" "\$(printf %s "\$@" | wc -c)"', "sh"] + args}))
    want = "%d\n%s\n%d\n" % (len(args), args[0], sum(len(a) for a in args))
    assert r["stdout"] == want, (r["stdout"][:200], want)
    assert (r["prebuilt_ms"] is not None) == prebuilt, (size, r["prebuilt_ms"])
    if prebuilt:
        wait_parked(s, before)
# the one built for the 50 KiB call is still there: a call that cannot use one leaves it
assert parked_of(s.proc.pid), "the parked sandbox was dropped"
s.close()
PY
}

# Out of descriptors with sandboxes built ahead (each holds its pipes and its protected
# paths): the server parks only what leaves a call room, calls beyond the limit get a clean
# tool error, and once the server has idled and built again, it holds exactly what it held
# before the burst: nothing leaks through parking, unparking or dropping the pool.
test_prebuild_fd_exhaustion() {
	prebuild_py <<PY || fail "the MCP session failed (see the traceback above)"
$PREBUILD_PY_HEAD
import resource
def lower():
    resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--max-concurrent", "20",
                            "--prebuild", "2"]), preexec_fn=lower)
s.initialize()
fds = lambda: len(os.listdir("/proc/%d/fd" % s.proc.pid))
def settled(parked=None):
    """The sandboxes built ahead (as many as parked, if given) and the descriptors, steady
    for half a second (a server short of descriptors waits a second before it builds)."""
    until = time.monotonic() + 10
    seen = []
    while time.monotonic() < until:
        seen.append((len(parked_of(s.proc.pid)), fds()))
        if len(seen) >= 6 and len(set(seen[-6:])) == 1 and parked in (None, seen[-1][0]):
            return seen[-1]
        time.sleep(0.1)
    raise AssertionError("the server did not settle: %s" % seen[-6:])
before = settled()
# it built what fits: at least one, and never so many that a call has no room
assert before[0] >= 1, before
for burst in range(2):
    ids = [s.call_async("run_command", {"argv": ["sh", "-c", "sleep 0.5; echo ok"]})
           for _ in range(20)]
    ok = refused = 0
    for i in ids:
        r = s.response(i, timeout=60)["result"]
        if not r["isError"]:
            assert r["structuredContent"]["stdout"] == "ok\n", r
            ok += 1
        else:
            t = M.text_of(r)
            assert "not started: " in t and "open files" in t, t
            refused += 1
    assert ok >= 1 and refused >= 1 and ok + refused == 20, (ok, refused)
    assert settled(before[0]) == before, (before, fds())
assert s.close() == 0
PY
}

test_prebuild_bad_values_refused() {
	local out rc v
	for v in 65 -1 abc 1.5; do
		out=$("$CORRAL" mcp -w "$WS" --prebuild "$v" </dev/null 2>&1)
		rc=$?
		assert_eq $rc 125 "--prebuild $v"
		assert_contains "$out" "--prebuild"
		assert_contains "$out" "0 to 64"
	done
	out=$(CORRAL_MCP_PREBUILD=many "$CORRAL" mcp -w "$WS" </dev/null 2>&1)
	assert_eq $? 125 "CORRAL_MCP_PREBUILD=many"
	assert_contains "$out" "CORRAL_MCP_PREBUILD"
	# 0 is off, and the server serves
	out=$("$CORRAL" mcp -w "$WS" --prebuild 0 </dev/null 2>&1)
	assert_eq $? 0 "--prebuild 0 ($out)"
}
