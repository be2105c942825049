# MCP server faults: what `corral mcp` does when its process, its client, its descriptors,
# the disk, the memory budget or the audit store fail under it. Each claim is judged on the
# host: pgrep of a unique marker for surviving processes, /proc for descriptors, file sizes
# for the disk. Every test works as root and as an unprivileged user.

# mcp_py (tests/integration/mcp.sh) runs a python script with tests/mcp_client.py importable.

# The server is SIGKILLed while a call runs (a command and a background child of it): nothing
# of the sandbox may outlive it. Its init dies with the server (PR_SET_PDEATHSIG) and takes
# the pid namespace with it.
test_mcp_fault_server_sigkill_mid_call() {
	local mark="corral-mcp-kill-$RANDOM$RANDOM"
	MARK=$mark mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, subprocess, time, mcp_client as M
mark = os.environ["MARK"]
def count():
    return len(subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split())
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--max-concurrent", "2"]))
s.initialize()
for i in range(2):
    s.call_async("run_command", {"argv": ["bash", "-c",
        "(exec -a %s-bg-%d sleep 300) & exec -a %s-%d sleep 300" % (mark, i, mark, i)]})
s.call_async("run_command", {"argv": ["bash", "-c", "exec -a %s-queued sleep 300" % mark]})
end = time.monotonic() + 10
while count() < 4 and time.monotonic() < end:
    time.sleep(0.05)
assert count() == 4, subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout
s.proc.kill()
assert s.proc.wait(timeout=5) == -9
end = time.monotonic() + 5
while count() and time.monotonic() < end:
    time.sleep(0.05)
assert count() == 0, subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout
PY
	assert_no_survivor "$mark"
}

# The client disappears mid-call: its ends of the server's stdin and stdout are closed at
# once, and in a second round only stdout (a client that crashed with its write end still
# held by someone). Either way the server notices at once, kills the sandbox and exits 0.
test_mcp_fault_client_vanishes_mid_call() {
	local mark="corral-mcp-vanish-$RANDOM$RANDOM"
	MARK=$mark mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, time
mark = os.environ["MARK"]
def alive():
    return subprocess.run(["pgrep", "-f", mark], stdout=subprocess.DEVNULL).returncode == 0
for how in ("both", "stdout"):
    # raw pipes, no reader thread: the test owns every descriptor it closes
    p = subprocess.Popen([os.environ["CORRAL"], "mcp", "-w", os.environ["WS"], "--audit", "off"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def send(o):
        p.stdin.write((json.dumps(o) + "\n").encode()); p.stdin.flush()
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert json.loads(p.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_command",
          "arguments": {"argv": ["bash", "-c", "exec -a %s-%s sleep 300" % (mark, how)]}}})
    end = time.monotonic() + 10
    while not alive() and time.monotonic() < end:
        time.sleep(0.05)
    assert alive(), "the command never started"
    t0 = time.monotonic()
    p.stdout.close()
    if how == "both":
        p.stdin.close()
    rc = p.wait(timeout=8)
    dt = time.monotonic() - t0
    err = p.stderr.read().decode()
    assert rc == 0, (how, rc, err)
    assert dt < 4, (how, dt)   # the command would run 300 s
    assert "the client is gone" in err or "end of input" in err, err
    end = time.monotonic() + 3
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(), (how, subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout)
    if how == "stdout":
        p.stdin.close()
    print("%s closed: exit 0 in %.2fs" % (how, dt))
PY
	assert_no_survivor "$mark"
}

# The server runs out of descriptors: a burst of 20 concurrent calls under a low
# RLIMIT_NOFILE (48; MCP_FAULT_NOFILE overrides it). The calls that cannot start get a clean
# tool error naming open files; the ones that started finish normally; afterwards the server
# serves normal calls and holds no more descriptors than before.
test_mcp_fault_fd_exhaustion() {
	local mark="corral-mcp-fds-$RANDOM$RANDOM"
	MARK=$mark NOFILE=${MCP_FAULT_NOFILE:-48} mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, resource, subprocess, time, mcp_client as M
mark, limit = os.environ["MARK"], int(os.environ["NOFILE"])
def lower():
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
# --prebuild 0: the count of descriptors below is exact only without sandboxes built ahead
# (they come and go as the server idles); test_prebuild_fd_exhaustion covers that case
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--max-concurrent", "20",
                            "--prebuild", "0"]),
             preexec_fn=lower)
s.initialize()
fds = lambda: len(os.listdir("/proc/%d/fd" % s.proc.pid))
before = fds()
for burst in range(2):
    ids = [s.call_async("run_command", {"argv": ["bash", "-c", "(exec -a %s sleep 1); echo ok" % mark]})
           for _ in range(20)]
    ok = refused = 0
    for i in ids:
        r = s.response(i, timeout=60)["result"]
        t = M.text_of(r)
        if not r["isError"]:
            assert r["structuredContent"]["stdout"] == "ok\n", t
            ok += 1
            continue
        # a clean tool error: not started, why, and what to do
        assert "not started: " in t and "open files" in t, t
        assert r["structuredContent"]["error"]["errno"] == 24 and r["structuredContent"]["exit_code"] is None, r
        assert "killed by signal" not in t, t
        refused += 1
    assert ok >= 1 and refused >= 1 and ok + refused == 20, (ok, refused)
    print("burst %d: %d ran, %d refused (RLIMIT_NOFILE %d)" % (burst, ok, refused, limit))
    # the server itself is fine, and serves a normal call after the burst
    assert s.response(s.request("ping"))["result"] == {}
    r = s.call("run_command", {"command": "echo again"})
    assert r["isError"] is False and r["structuredContent"]["stdout"] == "again\n", M.text_of(r)
    # a finished run's descriptors are closed right after its answer is sent
    for _ in range(100):
        if fds() == before:
            break
        time.sleep(0.05)
    assert fds() == before, (before, fds())
assert subprocess.run(["pgrep", "-f", mark], stdout=subprocess.DEVNULL).returncode == 1
assert s.close() == 0
PY
	assert_no_survivor "$mark"
}

# The disk fills up. A file in the workspace grows past --fsize (the writer gets SIGXFSZ and
# the result says limit fsize; the host file stops at the limit), the private /tmp fills up
# (--tmpfs-size: ENOSPC inside, nothing on the host), and as root also a workspace on a
# 1 MiB tmpfs runs out of space. The server reports each and keeps serving.
test_mcp_fault_disk_full() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, mcp_client as M
ws = os.environ["WS"]
s = M.Server(M.corral_argv(["-w", ws, "--audit", "off", "--fsize", "1M", "--tmpfs-size", "2M"]))
s.initialize()
r = s.call("run_command", {"command": "head -c 8M /dev/zero > big.bin"})
t, sc = M.text_of(r), r["structuredContent"]
assert r["isError"] and sc["limit"] == "fsize" and "limit: fsize" in t, t
assert "\nhint: A file grew past the file-size limit" in t, t
assert os.path.getsize(ws + "/big.bin") <= 1 << 20, os.path.getsize(ws + "/big.bin")
r = s.call("run_command", {"command": "i=0; while head -c 512k /dev/zero > /tmp/f$i; do i=$((i+1)); done; echo wrote=$i; exit 3"})
t, sc = M.text_of(r), r["structuredContent"]
assert r["isError"] and "No space left on device" in sc["stderr"], t
assert int(sc["stdout"].split("=")[1]) <= 4, sc["stdout"]       # 2 MiB of 512 KiB files
r = s.call("run_command", {"command": "df -k /tmp | tail -1; echo ok > still-writable && cat still-writable"})
assert not r["isError"] and r["structuredContent"]["stdout"].endswith("ok\n"), M.text_of(r)
assert s.response(s.request("ping"))["result"] == {}
assert s.close() == 0
PY
	is_root || return 0
	# root: a real full disk under the workspace
	local small="$WS/../mcp-small-$$"
	mkdir -p "$small" && mount -t tmpfs -o size=1m,mode=0777 tmpfs "$small" ||
		fail "cannot mount a 1 MiB tmpfs at $small as root"
	SMALL=$small mcp_py <<'PY'
import os, mcp_client as M
small = os.environ["SMALL"]
s = M.Server(M.corral_argv(["-w", small, "--audit", "off"]))
s.initialize()
r = s.call("run_command", {"command": "head -c 4M /dev/zero > fill.bin; echo rc=$?"})
sc = r["structuredContent"]
assert "No space left on device" in sc["stderr"] and sc["stdout"] == "rc=1\n", M.text_of(r)
r = s.call("run_command", {"command": "head -c 64k /dev/zero > more.bin"})
assert r["isError"] and "No space left on device" in r["structuredContent"]["stderr"], M.text_of(r)
r = s.call("run_command", {"command": "rm fill.bin && echo more > more.txt && cat more.txt"})
assert not r["isError"] and r["structuredContent"]["stdout"] == "more\n", M.text_of(r)
assert s.close() == 0
PY
	local rc=$?
	umount "$small" && rmdir "$small"
	[ $rc = 0 ] || fail "the full-workspace session failed"
}

# A call runs out of its memory budget (--memory 64M). With a cgroup (root) the kernel kills
# it and the result says limit memory; with the RLIMIT_DATA fallback (no delegated cgroup,
# as an unprivileged user here) the allocation fails inside the sandbox and the command
# exits with its own error. Either way the server serves the next call. (python3 fills its
# 256 MiB for real; a compiler may drop a malloc+memset whose memory is never read.)
test_mcp_fault_memory_budget() {
	local m="corral-mcp-mem-$RANDOM$RANDOM"
	MARK=$m mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import os, mcp_client as M
mark = os.environ["MARK"]
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--memory", "64M"]))
s.initialize()
hog = "import sys; sys.argv[0] = %r; b = b'x' * (256 << 20); print('allocated', len(b) >> 20)" % mark
for round in range(2):
    r = s.call("run_command", {"argv": ["python3", "-c", hog]})
    t, sc = M.text_of(r), r["structuredContent"]
    assert r["isError"] and "allocated" not in sc["stdout"], t
    if sc["isolation"]["cgroup"]["applied"]:
        assert sc["limit"] == "memory" and sc["signal"] == 9 and "limit: memory" in t, t
        assert "hint: The command ran out of its memory limit" in t, t
        assert sc["usage"]["max_rss_kb"] <= 80 * 1024, sc["usage"]
        how = "cgroup: killed by the kernel, limit memory"
    else:
        assert "data (memory fallback)" in sc["isolation"]["rlimits"]["detail"], sc["isolation"]
        assert "MemoryError" in sc["stderr"] and sc["exit_code"] == 1 and sc["limit"] is None, t
        how = "rlimit fallback: MemoryError inside, exit 1, no limit reported"
    r = s.call("run_command", {"command": "echo next"})
    assert not r["isError"] and r["structuredContent"]["stdout"] == "next\n", M.text_of(r)
print(how)
assert s.close() == 0
PY
	assert_no_survivor "$m"
}

# The audit store cannot be written: a path that cannot be created (for every user), a
# read-only directory (unprivileged users), and a store another process holds locked. Calls
# succeed all the same, and stderr carries one warning.
test_mcp_fault_audit_unwritable() {
	local ro="$WS/ro"
	mkdir -p "$ro" && chmod 0555 "$ro"
	RO=$ro mcp_py <<'PY'
import os, sqlite3, subprocess, time, mcp_client as M
ws = os.environ["WS"]
stores = ["/proc/corral-no-such-dir/audit.db"]
if os.getuid() != 0:            # root writes into a 0555 directory anyway
    stores.append(os.environ["RO"] + "/audit.db")
def session(store):
    s = M.Server(M.corral_argv(["-w", ws, "--audit", store]))
    s.initialize()
    for i in range(3):
        r = s.call("run_command", {"command": "echo %d" % i})
        assert not r["isError"] and r["structuredContent"]["stdout"] == "%d\n" % i, M.text_of(r)
    r = s.call("can_i", {"op": "read", "target": "x"})
    assert not r["isError"] and r["structuredContent"]["allowed"] is True, r
    assert s.close() == 0
    err = s.stderr_text.decode()
    assert "audit: audit" not in err, err     # the word once
    return [l for l in err.splitlines() if l.startswith("corral mcp: audit store ")]
for store in stores:
    warn = session(store)
    assert len(warn) == 1 and store in warn[0] and "calls are not affected" in warn[0], warn
    assert not os.path.exists(store)
# a store that exists but is locked by another process for the whole session
db = os.path.realpath(ws) + "/locked.db"
subprocess.run([os.environ["CORRAL"], "run", "-w", ws, "--audit", db, "--", "true"], check=True)
con = sqlite3.connect(db, isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
t0 = time.monotonic()
warn = session(db)
dt = time.monotonic() - t0
con.execute("ROLLBACK")
con.close()
assert len(warn) == 1 and "locked" in warn[0], warn
# each write gives up after 200 ms, then writes pause: sqlite's default wait (5 s a write)
# would take 15 s or more here; the bound leaves room for a slow sanitizer run
assert dt < 8, dt
v = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "verify"], capture_output=True, text=True)
assert v.returncode == 0, v
PY
	local rc=$?
	chmod 0755 "$ro" && rmdir "$ro"
	[ $rc = 0 ] || fail "the audit session failed"
}

# The disk fills up under the audit store too (the common case: the store and the workspace
# on one filesystem; here a 2 MiB tmpfs, as root). Calls go on being answered; the records
# that could not be written are not silently lost: the next write that succeeds, or else the
# server at its exit, writes their count (a store_unavailable event, whatever the pause), and
# the chain still verifies.
test_mcp_fault_disk_full_audit() {
	# root only (a tmpfs mount); the unprivileged pass has nothing to test here, and a skip
	# there would count as a failure under CORRAL_MUST_WORK
	is_root || return 0
	local small="$WS/../mcp-small-audit-$$"
	mkdir -p "$small" && mount -t tmpfs -o size=2m,mode=0777 tmpfs "$small" ||
		fail "cannot mount a 2 MiB tmpfs at $small as root"
	SMALL=$small mcp_py <<'PY'
import json, os, subprocess, mcp_client as M
small = os.environ["SMALL"]
db = small + "/audit.db"
s = M.Server(M.corral_argv(["-w", small, "--audit", db]))
s.initialize()
first = s.call("run_command", {"command": "echo first"})["structuredContent"]["id"]
r = s.call("run_command", {"command": "head -c 4M /dev/zero > fill.bin; echo rc=$?"})
assert "No space left on device" in r["structuredContent"]["stderr"], M.text_of(r)
for i in range(3):
    r = s.call("run_command", {"command": "echo %d" % i})
    assert r["structuredContent"]["stdout"] == "%d\n" % i, M.text_of(r)
r = s.call("run_command", {"command": "rm fill.bin && echo freed"})
assert r["structuredContent"]["stdout"] == "freed\n", M.text_of(r)
assert s.close() == 0
err = s.stderr_text.decode()
assert err.count("corral mcp: audit store ") == 1 and "full" in err and "audit: audit" not in err, err
# Which writes fail on a full tmpfs is not fixed: SQLite reuses WAL space it already has, so
# a later call's record may succeed and write the gap itself. If the gap was still open at
# the exit, the server must have written it then (test_audit_gap_flush_at_exit pins that
# path); either way the count below must add up.
if "could not be written" in err:
    assert "the gap is recorded" in err, err
out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
rows = [json.loads(l) for l in out.splitlines()]
ex = [r["id"] for r in rows if r["type"] == "execution"]
gaps = [r["detail"] for r in rows if r["type"] == "event" and r["kind"] == "store_unavailable"]
assert ex[0] == first, ex
# every call after the first is either a row or counted in the gap
assert len(gaps) >= 1 and len(ex) - 1 + sum(g["missed"] for g in gaps) >= 5, (ex, gaps)
assert "full" in gaps[-1]["error"], gaps
v = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "verify"], capture_output=True, text=True)
assert v.returncode == 0, v.stdout + v.stderr
PY
	local rc=$?
	umount "$small" && rmdir "$small"
	[ $rc = 0 ] || fail "the full-disk audit session failed"
}

# The server is SIGKILLed (no shutdown at all) after answering calls: every call the client
# got an answer for is in the store, and the chain verifies. A record is committed before
# its answer is sent.
test_mcp_fault_sigkill_keeps_acknowledged_records() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, subprocess, mcp_client as M
ws = os.environ["WS"]
db = ws + "/audit.db"
s = M.Server(M.corral_argv(["-w", ws, "--audit", db]))
s.initialize()
acked = []
for i in range(5):
    acked.append(s.call("run_command", {"command": "echo %d" % i})["structuredContent"]["id"])
sess = s.call("shell_exec", {"command": "echo in-session"})["structuredContent"]
acked.append(sess["id"])
pl = s.call("run_pipeline", {"stages": [["echo", "p"], ["cat"]]})["structuredContent"]
acked.append(pl["id"])
s.call_async("run_command", {"command": "sleep 300"})   # in flight: not acknowledged
s.proc.kill()
assert s.proc.wait(timeout=5) == -9
out = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "export"], capture_output=True, text=True, check=True).stdout
ids = {json.loads(l)["id"] for l in out.splitlines()}
missing = [a for a in acked if a not in ids]
assert not missing, ("acknowledged calls missing from the store", missing)
v = subprocess.run([os.environ["CORRAL"], "audit", "--db", db, "verify"], capture_output=True, text=True)
assert v.returncode == 0, v.stdout + v.stderr
print("%d acknowledged calls, all recorded" % len(acked))
PY
}

# Malformed JSON-RPC interleaved with good requests, under load: 60 calls in flight (4 at a
# time) with garbage between them, all in a few big writes. Every good request is answered
# correctly, every bad line gets its error, and nothing is lost or crossed.
test_mcp_fault_malformed_under_load() {
	mcp_py <<'PY' || fail "the MCP session failed (see the traceback above)"
import json, os, random, mcp_client as M
s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--audit", "off", "--max-concurrent", "4",
                            "--max-message-bytes", "4k"]))
s.initialize()
bad = ['{"jsonrpc": "2.0", "id": 1, "method": ', '{garbage', '[]', '[{"jsonrpc":"2.0","id":7,"method":"ping"}]',
       '"str"', '{"jsonrpc":"2.0","id":true,"method":"ping"}', '{"jsonrpc":"2.0","method":"tools/call","id":{}}',
       '\udcff\udcfe', 'x' * 5000, '{"jsonrpc":"2.0","id":"u-%d","method":"no/such"}',
       '{"jsonrpc":"2.0","id":"n-%d","method":"tools/call","params":{"name":"run_command","arguments":{"command":7}}}']
rnd = random.Random(7)
lines, good, want_err = [], {}, 0
for i in range(60):
    id = "g-%d" % i
    good[id] = i
    lines.append(json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": "run_command", "arguments": {"argv": ["echo", str(i)]}}}))
    for _ in range(rnd.randrange(3)):
        b = rnd.choice(bad)
        lines.append(b % i if "%d" in b else b)
        want_err += 1
    if i % 10 == 0:
        lines.append(json.dumps({"jsonrpc": "2.0", "id": "p-%d" % i, "method": "ping"}))
data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
for k in range(0, len(data), 8192):
    s.send_raw(data[k:k + 8192])
got_good, got_err, got_ping = {}, 0, 0
while len(got_good) < 60 or got_err < want_err or got_ping < 6:
    m = s.recv(timeout=60)
    id = m.get("id")
    if isinstance(id, str) and id.startswith("g-"):
        got_good[id] = m["result"]["structuredContent"]["stdout"]
    elif isinstance(id, str) and id.startswith("p-"):
        assert m["result"] == {}, m
        got_ping += 1
    else:
        assert "error" in m or m["result"]["isError"], m
        got_err += 1
assert got_good == {id: "%d\n" % i for id, i in good.items()}, got_good
s.drain(0.5)
assert not s.pending, s.pending
assert s.response(s.request("ping"))["result"] == {}
assert s.close() == 0
print("60 calls, %d bad lines: all answered" % want_err)
PY
}
