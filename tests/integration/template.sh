# The mount template (issue 9's fast path, DESIGN §18): `corral mcp` builds the system part of
# every sandbox's tree (/usr, the /etc allow-list, /dev's nodes) once, in a holder process of
# its own, on a tmpfs read-only at the superblock, and each sandbox attaches a copy of it. The
# isolation battery runs through this door (tests/escape/via_mcp.py checks that every call
# took a copy); these tests hold the sharing itself to host-side evidence: nothing a sandbox
# does reaches the template or another sandbox, a system file replaced on the host reaches
# the next call, and the holder never outlives the server.

template_py() {
	PYTHONPATH="$TESTDIR:$TESTDIR/escape" CORRAL="$CORRAL" WS="$WS" python3 - "$@"
}

# How to start the server's parent in a mount namespace of its own: as root, that alone;
# otherwise in a user namespace too, keeping the capabilities there for the binds (the server
# itself gets none).
own_mount_ns() {
	if is_root; then
		echo "unshare -m --propagation private"
	else
		echo "unshare -U -m --map-current-user --keep-caps --propagation private"
	fi
}

TEMPLATE_PY_HEAD='
import os, signal, subprocess, time, json, mcp_client as M
from via_mcp import procs, alive, gone_soon

def server(*extra, argv=None):
    s = M.Server(argv or M.corral_argv(["-w", os.environ["WS"], "--audit", "off"] + list(extra)))
    s.initialize()
    return s

def sc(r):
    return r["structuredContent"]

def detail(r):
    return sc(r)["isolation"]["mountns"]["detail"]

def holders(pid):
    """The server children named corral-template (alive)."""
    return {p for p, (name, state, ppid) in procs().items()
            if ppid == pid and name == "corral-template" and state != "Z"}

TPL = "a copy of a template shared read-only (superblock) between sandboxes"

def follows(s, want):
    """Every call sees want as /etc/hostname; within 10 s one takes a copy of a rebuilt
    template (a new holder, for the new key)."""
    until = time.monotonic() + 10
    seen = []
    while True:
        r = s.call("run_command", {"command": "cat /etc/hostname"})
        assert sc(r)["stdout"] == want, (sc(r)["stdout"], detail(r), seen)
        seen.append(TPL in detail(r))
        if seen[-1] or time.monotonic() > until:
            break
        time.sleep(0.2)
    assert seen[-1], "no call took a copy of a rebuilt template: %s" % seen
'

# Every call takes a copy of the template (the isolation record says so), whose root and /dev
# are read-only at the superblock (mountinfo's super options), so that what a sandbox tries to
# leave in them fails; the next sandbox sees none of it; and, as root (the holder is not
# dumpable: only root reads its tree through /proc), the template itself is unchanged.
test_template_shared_tree_is_read_only_and_unchanged() {
	template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
s = server()
r = s.call("run_command", {"command": "true"})
assert TPL in detail(r), detail(r)
hs = holders(s.proc.pid)
assert len(hs) == 1, hs
h = hs.pop()
def listing():
    try:
        return {d: sorted(os.listdir("/proc/%d/root/newroot%s" % (h, d))) for d in ("/", "/dev", "/etc")}
    except PermissionError:
        assert os.getuid() != 0, "root cannot read the holder's tree"
        return None
before = listing()
r = sc(s.call("run_command", {"command":
    "awk '\$5 == \"/\" || \$5 == \"/dev\" {print \$5, \$NF, \$(NF-1)}' /proc/self/mountinfo; "
    "touch /left-by-a; echo root=\$?; mkdir /dev/left-by-a; echo dev=\$?; "
    "ln -s x /etc/left-by-a; echo etc=\$?"}))
out = r["stdout"]
assert "root=1" in out and "dev=1" in out and "etc=1" in out, (out, r["stderr"])
assert "Read-only file system" in r["stderr"], r["stderr"]
supers = [l for l in out.splitlines() if l.startswith("/ ") or l.startswith("/dev ")]
# "/ ro,size=4096k,mode=755 tmpfs": the superblock's options, read-only
assert len(supers) == 2 and all(l.split()[1].split(",")[0] == "ro" for l in supers), supers
r2 = sc(s.call("run_command", {"command": "ls -a / /dev /etc"}))
assert "left-by-a" not in r2["stdout"], r2["stdout"]
assert TPL in r2["isolation"]["mountns"]["detail"]
after = listing()
assert before == after, (before, after)
if os.getuid() == 0:
    assert before is not None and "usr" in before["/"] and "null" in before["/dev"], before
s.close()
PY
}

# A system file replaced on the host (here: another file bound over /etc/hostname, in a mount
# namespace of the server's own) reaches the next call, never the template's old copy: the
# template key holds the identity of every source, so the launch builds its own tree and a
# new holder is started for the new key; calls take copies again once it has built.
test_template_follows_a_replaced_system_file() {
	local d
	d=$(mktemp -d)
	echo "first-hostname" >"$d/a"
	echo "second-hostname" >"$d/b"
	chmod 755 "$d"
	chmod 644 "$d/a" "$d/b"
	D="$d" UNSHARE="$(own_mount_ns)" template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
d = os.environ["D"]
# The server's parent in that namespace binds a over /etc/hostname, starts the server on
# the same stdio, and binds b over it at SIGUSR1.
CONTROL = """
import ctypes, os, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
def bind(src):
    if libc.mount(src.encode(), b"/etc/hostname", None, 4096, None) != 0:
        sys.exit("bind %s: %s" % (src, os.strerror(ctypes.get_errno())))
bind(sys.argv[1])
signal.signal(signal.SIGUSR1, lambda *a: bind(sys.argv[2]))
drop = lambda: libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
p = subprocess.Popen(sys.argv[3:], preexec_fn=drop)
while True:
    try:
        sys.exit(p.wait())
    except InterruptedError:
        pass
"""
argv = os.environ["UNSHARE"].split() + ["python3", "-c", CONTROL, d + "/a", d + "/b"] + \
    M.corral_argv(["-w", os.environ["WS"], "--audit", "off"])
s = server(argv=argv)
r = s.call("run_command", {"command": "cat /etc/hostname"})
assert sc(r)["stdout"] == "first-hostname\n", sc(r)
assert TPL in detail(r), detail(r)
s.proc.send_signal(signal.SIGUSR1)
time.sleep(0.2)
# every call after the change sees the new file; within a few seconds they use a template
# again (a new holder, for the new key)
follows(s, "second-hostname\n")
s.close()
PY
	rm -rf "$d"
}

# A system file replaced by a rename, with no mount at all, reaches the next call too. A
# server keeps its looks at the system paths (hcache.c: the template key's identities among
# them) while inotify reports no change, so here only the watch on /etc can tell. The /etc
# renamed into is a directory of the test's own, bound over /etc in a mount namespace of the
# server's (made before the server starts: the mount itself is not the change looked for).
test_template_follows_a_system_file_renamed_over() {
	local d
	d=$(mktemp -d)
	mkdir "$d/etc"
	cp /etc/passwd /etc/group "$d/etc/"
	echo "first-hostname" >"$d/etc/hostname"
	chmod 755 "$d" "$d/etc"
	chmod 644 "$d/etc/"*
	D="$d" UNSHARE="$(own_mount_ns)" template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
d = os.environ["D"]
CONTROL = """
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(sys.argv[1].encode(), b"/etc", None, 4096, None) != 0:
    sys.exit("bind over /etc: %s" % os.strerror(ctypes.get_errno()))
drop = lambda: libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
sys.exit(subprocess.call(sys.argv[2:], preexec_fn=drop))
"""
argv = os.environ["UNSHARE"].split() + ["python3", "-c", CONTROL, d + "/etc"] + \
    M.corral_argv(["-w", os.environ["WS"], "--audit", "off"])
s = server(argv=argv)
for _ in range(3):
    r = s.call("run_command", {"command": "cat /etc/hostname"})
    assert sc(r)["stdout"] == "first-hostname\n", sc(r)
assert TPL in detail(r), detail(r)
with open(d + "/etc/hostname.new", "w") as f:
    f.write("second-hostname\n")
os.chmod(d + "/etc/hostname.new", 0o644)
os.rename(d + "/etc/hostname.new", d + "/etc/hostname")
follows(s, "second-hostname\n")
s.close()
PY
	rm -rf "$d"
}

# The holder ends with the server: at its exit, and when it is killed outright (SIGKILL: the
# holder's death signal), by host-side evidence (its pid).
test_template_holder_ends_with_the_server() {
	template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
s = server()
s.call("run_command", {"command": "true"})
h = holders(s.proc.pid)
assert len(h) == 1, h
assert s.close() == 0
left = gone_soon(h, 0.5)
assert not left, "the template holder survived the server: %s" % left
s = server()
s.call("run_command", {"command": "true"})
h = holders(s.proc.pid)
assert len(h) == 1, h
s.proc.send_signal(signal.SIGKILL)
s.proc.wait()
left = gone_soon(h)
assert not left, "the template holder survived a killed server: %s" % left
PY
}

# --mount-template off: no holder, and every sandbox builds its own tree (the record says
# nothing of a template); a bad value is refused before serving (exit 125, named).
test_template_off_and_bad_value() {
	template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
s = server("--mount-template", "off")
r = s.call("run_command", {"command": "touch /x 2>&1; true"})
assert "template" not in detail(r), detail(r)
assert detail(r).startswith("tmpfs root, system read-only"), detail(r)
assert not holders(s.proc.pid)
s.close()
p = subprocess.run(M.corral_argv(["-w", os.environ["WS"], "--mount-template", "maybe"]),
                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
assert p.returncode == 125, p
assert "--mount-template" in p.stderr and "expected on or off" in p.stderr, p.stderr
PY
}

# A workspace outside /tmp lands on the template's read-only root: the template makes its
# mount point (and the directories above it), and the workspace is there, writable, with the
# file on the host afterwards.
test_template_workspace_on_the_root() {
	local w
	w=$(mktemp -d -p /var/tmp corral-tplws.XXXXXX)
	W="$w" template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
w = os.environ["W"]
s = M.Server(M.corral_argv(["-w", w, "--audit", "off"]))
s.initialize()
r = s.call("run_command", {"command": "pwd; echo made > f; ls -d /var/tmp/*"})
s.close()
assert TPL in detail(r), detail(r)
out = sc(r)["stdout"].splitlines()
assert out[0] == w and out[1:] == [w], (out, sc(r)["stderr"])
assert open(os.path.join(w, "f")).read() == "made\n"
PY
	rm -rf "$w"
}

# Out of descriptors is the server's trouble, not the holder's: calls refused with EMFILE (a
# copy received without room for its descriptor, no room for a new holder's socket) leave
# the template on, and once descriptors are back the next call takes a copy again. (It was
# turned off after three such "failures", for good; with --prebuild, whose host cache holds
# two more descriptors, test_mcp_spawn_failure_is_tool_error's rounds did it.)
test_template_survives_descriptor_exhaustion() {
	template_py <<PY || fail "the MCP session failed (see the traceback above)"
$TEMPLATE_PY_HEAD
import resource
def lower():
    resource.setrlimit(resource.RLIMIT_NOFILE, (24, 4096))
for extra in ([], ["--prebuild", "2"]):
    # (the audit store on, as by default: its three descriptors are part of the squeeze)
    s = M.Server(M.corral_argv(["-w", os.environ["WS"], "--max-concurrent", "8"] + extra),
                 preexec_fn=lower)
    s.initialize()
    emfile = 0
    for round in range(4):
        ids = [s.call_async("run_command", {"command": "true"}) for _ in range(8)]
        for i in ids:
            r = s.response(i, timeout=30)["result"]
            emfile += r["isError"] and "Too many open files" in M.text_of(r)
    assert emfile >= 8, (extra, emfile)
    resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (1024, 4096))
    r = s.call("run_command", {"command": "true"})
    assert TPL in detail(r), (extra, detail(r))
    assert s.close() == 0
    err = s.stderr_text.decode()
    assert "mount template off" not in err, (extra, err)
PY
}
