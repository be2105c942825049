#!/usr/bin/env python3
"""Run `corral mcp` under valgrind memcheck through a scripted session that touches every
path of the server: protocol errors, lifecycle, every tool (can_i included), argument errors,
oversized lines, progress, concurrency, queueing, cancellation (running and queued), the audit
record and EOF with calls still running; then two short sessions for a profile file with
policy flags, an audit store that cannot be opened, and a bad profile. Exits non-zero on any
valgrind error or leak.

    python3 tests/valgrind_mcp.py build/corral-dynamic

The binary must be dynamically linked (make build/corral-dynamic; build/corral is a static
PIE): memcheck finds leaks and heap errors by replacing malloc, which it can do only in a
shared libc, and against a static binary it would report nothing and pass. A binary without
an ELF interpreter is refused.

Valgrind runs the cloned sandbox child on its emulated CPU too, and it emulates neither
seccomp, Landlock nor openat2, and it refuses any setrlimit(RLIMIT_NOFILE) whose hard limit
differs from its own. So the session uses --mode none (no isolation layers) and
--nofile 1048576 (clamped to valgrind's own limit), and --child-silent-after-fork; what is
checked is the server, not the sandbox. Not part of `make check` (about a minute).
"""
import os, shutil, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcp_client as M  # noqa: E402


def has_interpreter(path):
    """Whether the ELF file at path names a dynamic loader (a PT_INTERP program header)."""
    import struct
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
            return False
        end = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack(end + "Q", head[32:40])
        phentsize, phnum = struct.unpack(end + "HH", head[54:58])
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return any(struct.unpack(end + "I", table[i * phentsize:i * phentsize + 4])[0] == 3
               for i in range(phnum))


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "build/corral-dynamic"
    if not has_interpreter(corral):
        sys.exit(f"valgrind_mcp: {corral} is statically linked: memcheck cannot replace its "
                 "malloc and would find no leak; give a dynamically linked build "
                 "(make build/corral-dynamic)")
    ws = tempfile.mkdtemp(prefix="corral-vg-")
    log = os.path.join(ws, "valgrind.log")
    vg = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
          "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=1",
          "--child-silent-after-fork=yes"]
    argv = vg + ["--log-file=" + log, corral, "mcp", "-w", ws, "--max-concurrent", "2",
                 "--allow-env", "MY_*", "--max-message-bytes", "64k", "--mode", "none",
                 "--nofile", "1048576", "--audit", os.path.join(ws, "audit.db"), "--audit-output"]
    s = M.Server(argv)
    T = 120
    s.send_raw("{bad json\n")
    assert s.recv(timeout=T)["error"]["code"] == -32700
    assert s.response(s.request("tools/list"), timeout=T)["error"]["code"] == -32002
    s.initialize()
    s.response(s.request("tools/list"), timeout=T)
    assert "exit: 2" in M.text_of(s.call("run_command", {"command": "echo hi; exit 2"}, timeout=T))
    assert s.call("run_command", {"argv": ["no-such-command"]}, timeout=T)["isError"]
    assert s.call("run_command", {"command": "sleep 5", "timeout_s": 0.3}, timeout=T)["isError"]
    assert "truncated" in M.text_of(s.call("run_command", {"command": "seq 1 400000"}, timeout=T))
    progs = {"python": "print(1)", "node": "console.log(1)", "bash": "echo 1", "sh": "echo 1"}
    tools = {t["name"]: t for t in s.response(s.request("tools/list"), timeout=T)["result"]["tools"]}
    for lang in tools["run_code"]["inputSchema"]["properties"]["language"]["enum"]:
        r = s.call("run_code", {"language": lang, "code": progs[lang]}, timeout=T)
        assert r["structuredContent"]["stdout"] == "1\n", M.text_of(r)
    r = s.call("run_code", {"language": "sh", "code": "cat", "stdin": "in"}, timeout=T)
    assert r["structuredContent"]["stdout"] == "in", M.text_of(r)
    r = s.call("run_command", {"command": "echo $MY_X", "env": {"MY_X": "y"}, "cwd": "."}, timeout=T)
    assert r["structuredContent"]["stdout"] == "y\n"
    r = s.call("can_i", {"op": "write", "target": "src/x.c"}, timeout=T)
    assert not r["isError"] and r["structuredContent"]["allowed"] is True, r
    # mode none isolates nothing: paths and the network are the host's (rule "mode none"),
    # and only the command rules answer no (here: a command that is not found)
    r = s.call("can_i", {"queries": [{"op": "connect", "target": "h:1"}, {"op": "exec", "target": "sh"},
                                     {"op": "read", "target": "/etc/shadow"},
                                     {"op": "exec", "target": "no-such-command-vg"}]}, timeout=T)
    answers = r["structuredContent"]["answers"]
    assert [a["allowed"] for a in answers] == [True, True, True, False], r
    assert [a["rule"] for a in answers][0::2] == ["mode none", "mode none"], r
    for bad in ({}, {"op": "fly", "target": "x"}, {"queries": [{"op": "read"}]}, {"queries": 3},
                {"op": "read", "target": "x", "queries": []}):
        assert s.call("can_i", bad, timeout=T)["isError"]
    # sessions and jobs: state, a timeout, jobs in and out of a session, lists, kill, close,
    # an ended shell; one session and one job are left open for the shutdown at EOF
    r = s.call("shell_exec", {"command": "cd /tmp; export V=1; echo a"}, timeout=T)
    sid = r["structuredContent"]["session"]["id"]
    r = s.call("shell_exec", {"session": sid, "command": "echo $V"}, timeout=T)
    assert r["structuredContent"]["stdout"] == "1\n", M.text_of(r)
    r = s.call("shell_exec", {"session": sid, "command": "sleep 5", "timeout_s": 0.5}, timeout=T)
    assert r["structuredContent"]["timed_out"], M.text_of(r)
    j = s.call("job_start", {"session": sid, "command": "echo sj; sleep 30"}, timeout=T)
    j2 = s.call("job_start", {"command": "echo bj"}, timeout=T)
    j, j2 = j["structuredContent"]["job"], j2["structuredContent"]["job"]
    time.sleep(1)
    assert "sj" in s.call("job_output", {"job": j}, timeout=T)["structuredContent"]["stdout"]
    assert "bj" in s.call("job_output", {"job": j2, "since_offset": 0}, timeout=T)["structuredContent"]["stdout"]
    s.call("job_list", {}, timeout=T)
    s.call("shell_list", {}, timeout=T)
    assert not s.call("job_kill", {"job": j}, timeout=T)["structuredContent"]["running"]
    assert s.call("shell_exec", {"command": "exit 3"}, timeout=T)["structuredContent"]["session"]["ended"]
    assert s.call("shell_exec", {"session": "nope", "command": "x"}, timeout=T)["isError"]
    s.call("shell_close", {"session": sid}, timeout=T)
    s.call("shell_exec", {"command": "sleep 30 &"}, timeout=T)
    s.call("job_start", {"command": "sleep 30"}, timeout=T)
    r = s.call("run_pipeline", {"stages": [["printf", "b\\na\\n"], ["sort"], ["head", "-n", "1"]]}, timeout=T)
    assert r["structuredContent"]["stdout"] == "a\n", M.text_of(r)
    assert s.call("run_pipeline", {"stages": [["true"], ["sh", "-c", "exit 2"]]}, timeout=T)["isError"]
    r = s.call("run_command", {"command": "true", "env": {"MY_TOKEN": "x"}}, timeout=T)
    assert r["isError"] and "deny rule" in M.text_of(r)
    for bad in ({"command": 1}, {"command": "x", "env": {"NO": "1"}}, {"command": "x", "cwd": "/etc"},
                {"zzz": 1}, {"argv": ["a", 2]}, {"command": "x", "timeout_s": 1e9}):
        assert s.call("run_command", bad, timeout=T)["isError"]
    s.send_raw('{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"nope"}}\n')
    assert s.response("u", timeout=T)["error"]["code"] == -32602
    s.send_raw("x" * 100000 + "\n")
    assert s.recv(timeout=T)["error"]["code"] == -32600
    s.send_raw('[1,2]\n{"jsonrpc":"2.0","id":null,"method":"ping"}\n')
    assert s.recv(timeout=T)["error"]["code"] == -32600 and s.recv(timeout=T)["error"]["code"] == -32600
    p = s.call_async("run_command", {"command": "for i in 1 2 3 4; do echo l$i; sleep 0.5; done"},
                     progress_token="t")
    s.call_async("run_command", {"command": "sleep 30"}, id="c1")
    s.call_async("run_command", {"command": "sleep 30"}, id="c2")   # queued
    time.sleep(1.5)
    s.notify("notifications/cancelled", {"requestId": "c2"})
    s.notify("notifications/cancelled", {"requestId": "c1"})
    assert not s.response(p, timeout=T)["result"]["isError"] and s.notifications
    ids = [s.call_async("run_command", {"command": "echo %d" % i}) for i in range(10)]
    got = sorted(int(s.response(i, timeout=T)["result"]["structuredContent"]["stdout"]) for i in ids)
    assert got == list(range(10)), got
    for _ in range(3):   # still running (two) and queued (one) at EOF
        s.call_async("run_command", {"command": "sleep 30"})
    time.sleep(2)
    rc = s.close(timeout=T)
    logs = [log]

    # A profile file with policy flags over it, and an audit store that cannot be opened.
    prof = os.path.join(ws, "profile.json")
    with open(prof, "w") as f:
        f.write('{"limits": {"timeout": "20s"}, "env": {"allow": ["PY_*"], "set": {"A": "b"}},'
                ' "commands": {"deny": [{"match": "wget", "reason": "no"}]}}')
    log2 = os.path.join(ws, "valgrind2.log")
    s = M.Server(vg + ["--log-file=" + log2, corral, "mcp", "-w", ws, "--mode", "none",
                       "--nofile", "1048576", "--profile", prof, "--ro", "/usr/share",
                       "--hide", "audit.db", "--redact", "flag", "--env", "PY_*",
                       "--audit", "/proc/corral-no-such/audit.db"])
    s.initialize("2025-03-26")
    r = s.call("run_command", {"command": "echo $A $PY_Q", "env": {"PY_Q": "q"}}, timeout=T)
    assert r["content"][0]["text"].endswith("--- stdout ---\nb q\n--- stderr ---\n(empty)\n"), r
    # mode none enforces no --hide (can_i says so); the profile's command rule still holds
    assert s.call("can_i", {"op": "read", "target": "audit.db"}, timeout=T)["content"][0]["text"].startswith("allowed")
    assert s.call("can_i", {"op": "exec", "target": "wget"}, timeout=T)["content"][0]["text"].startswith("denied")
    assert s.call("run_command", {"command": "true", "env": {"OTHER": "1"}}, timeout=T)["isError"]
    rc2 = s.close(timeout=T)
    logs.append(log2)
    assert b"serving without an audit record" in s.stderr_text, s.stderr_text
    # A bad profile: refused before serving.
    with open(os.path.join(ws, "bad.json"), "w") as f:
        f.write('{"limits": {"timeout": "soon"}}')
    log3 = os.path.join(ws, "valgrind3.log")
    s = M.Server(vg + ["--log-file=" + log3, corral, "mcp", "-w", ws, "--profile",
                       os.path.join(ws, "bad.json")])
    rc3 = s.wait(timeout=T)
    logs.append(log3)
    errors = 0 if rc3 == 125 else 1   # 125 is the expected refusal; valgrind's own is 1
    for l in logs:
        text = open(l).read()
        summary = [x for x in text.splitlines() if "ERROR SUMMARY" in x or "heap blocks" in x or "total heap usage" in x]
        print("%s:\n  %s" % (os.path.basename(l), "\n  ".join(summary)))
        if "ERROR SUMMARY: 0 errors" not in text:
            errors += 1
    print("valgrind exit status %d, %d, %d (the last is the refused profile: 125)" % (rc, rc2, rc3))
    shutil.rmtree(ws, ignore_errors=True)
    ok = rc == 0 and rc2 == 0 and errors == 0
    print("PASS valgrind" if ok else "FAIL valgrind (see the log above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
